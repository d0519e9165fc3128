// Blueline console: live conversation updates, copy buttons and
// confirmations. Every page works without this script. It never submits
// the login link's form: a mail scanner that runs scripts would spend the
// link and get a session; only a person pressing the button signs in.
"use strict";

document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      var source = document.getElementById(button.dataset.copy);
      if (!source || !navigator.clipboard) {
        return;
      }
      navigator.clipboard.writeText(source.textContent.trim()).then(function () {
        button.textContent = "Copied";
      });
    });
  });

  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.dataset.confirm)) {
        event.preventDefault();
      }
    });
  });

  var live = document.querySelector("[data-live]");
  if (live && window.EventSource) {
    var scrollToEnd = function () {
      live.scrollTop = live.scrollHeight;
    };
    scrollToEnd();
    var source = new EventSource(live.dataset.live);
    // The server renders the messages (escaped by its templates): the
    // fragment replaces the list as a whole.
    source.addEventListener("messages", function (event) {
      live.innerHTML = event.data;
      live.dataset.updated = String(Date.now());
      scrollToEnd();
    });
    live.dataset.connected = "true";
  }
});
