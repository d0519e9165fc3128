// A program against the types openapi-typescript generates from
// apidoc/openapi.json: apidoc/generators.sh type-checks it.
import type { components, paths } from "./schema";

type SendBody = paths["/v1/messages"]["post"]["requestBody"]["content"]["application/json"];
type Sent = paths["/v1/messages"]["post"]["responses"][201]["content"]["application/json"];
type Error = components["schemas"]["Error"];
type NotFound = paths["/v1/messages"]["post"]["responses"][404]["content"]["application/json"];

const text: SendBody = { from: "+15550000001", to: "+15551230001", text: "hi" };
const file: SendBody = { from: "+15550000001", to: "+15551230001", attachments: ["file_1"] };
const later: SendBody = { ...text, send_at: Date.now() + 60_000 };

function report(e: Error): string {
  return `${e.error.type} ${e.error.code}: ${e.error.message}`;
}
const missing: NotFound = {
  error: { type: "not_found_error", code: "line_not_found", message: "No line." },
  request_id: "req_2222222222222222222222222a",
};

type ReactBody = paths["/v1/reactions"]["post"]["requestBody"]["content"]["application/json"];
const tada: ReactBody = { from: "+15550000001", to: "+15551230001", message_id: "msg_1", type: "🎉" };

type Page = paths["/v1/messages"]["get"]["parameters"]["query"];
const page: Page = { from: "+15550000001", to: "+15551230001", limit: 20 };

function id(s: Sent): string {
  return s.id;
}

export { text, file, later, report, missing, tada, page, id };
