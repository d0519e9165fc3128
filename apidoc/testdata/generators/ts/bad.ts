// Must NOT type-check: the send body's from and to are required.
import type { paths } from "./schema";

type SendBody = paths["/v1/messages"]["post"]["requestBody"]["content"]["application/json"];

export const bad: SendBody = { text: "hi" };
