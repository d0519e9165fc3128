// Blueline console: local times, live conversation updates, copy buttons
// and confirmations. Every page works without this script. It never
// submits the login link's form: a mail scanner that runs scripts would
// spend the link and get a session; only a person pressing the button
// signs in.
"use strict";

// Each <time datetime> is shown in the browser's local time, in one format
// on every page; its title keeps the UTC time the server wrote.
function localTimes(root) {
  var pad = function (n) {
    return (n < 10 ? "0" : "") + n;
  };
  root.querySelectorAll("time[datetime]").forEach(function (el) {
    var d = new Date(el.getAttribute("datetime"));
    if (isNaN(d.getTime())) {
      return;
    }
    el.textContent = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  });
}

// A conversation opens at its newest message and stays there as pictures
// load and messages arrive, unless the reader scrolled up: then nothing
// moves the view, and a button offers the new messages.
function liveConversation(live) {
  var list = live.querySelector("ol.messages");
  var atEnd = true;
  var toEnd = function () {
    live.scrollTop = live.scrollHeight;
  };
  var newer = document.createElement("button");
  newer.type = "button";
  newer.className = "newer";
  newer.hidden = true;
  newer.textContent = "New messages ↓";
  newer.addEventListener("click", function () {
    atEnd = true;
    toEnd();
  });
  live.after(newer);
  // A scroll that comes with a change of size is the layout's (pictures,
  // the window), not the reader's: it does not take the view off the end.
  var size = [live.scrollHeight, live.clientHeight];
  live.addEventListener("scroll", function () {
    var resized = live.scrollHeight !== size[0] || live.clientHeight !== size[1];
    size = [live.scrollHeight, live.clientHeight];
    if (resized && atEnd) {
      toEnd();
      return;
    }
    // Within a few pixels of the end is at the end (zoom rounds).
    atEnd = live.scrollHeight - live.scrollTop - live.clientHeight <= 24;
    live.dataset.following = String(atEnd);
    if (atEnd) {
      newer.hidden = true;
    }
  });
  // Pictures load after the page is laid out, and make the list taller;
  // a window resized makes the view shorter or taller.
  var keep = function () {
    size = [live.scrollHeight, live.clientHeight];
    if (atEnd) {
      toEnd();
    }
  };
  live.addEventListener("load", keep, true);
  if (window.ResizeObserver) {
    var resized = new ResizeObserver(keep);
    resized.observe(list);
    resized.observe(live);
  }

  // Each message as the server last rendered it (before its times were
  // made local): one unchanged is kept as it is, pictures loaded.
  var sources = {};
  list.querySelectorAll(":scope > li[data-message]").forEach(function (li) {
    sources[li.dataset.message] = li.outerHTML;
  });
  toEnd();

  if (!window.EventSource) {
    return;
  }
  var source = new EventSource(live.dataset.live);
  // The server renders the chat (escaped by its templates) and sends it
  // whole: its list is merged into the one shown, the rest (who is
  // typing) replaces what was there.
  source.addEventListener("messages", function (event) {
    var fragment = document.createElement("template");
    fragment.innerHTML = event.data;
    var fresh = fragment.content.querySelector("ol.messages");
    var added = false;
    if (fresh) {
      var shown = {};
      list.querySelectorAll(":scope > li[data-message]").forEach(function (li) {
        shown[li.dataset.message] = li;
      });
      var items = Array.prototype.map.call(fresh.children, function (li) {
        var id = li.dataset.message;
        if (id && shown[id] && sources[id] === li.outerHTML) {
          return shown[id];
        }
        added = added || (id && !shown[id]);
        if (id) {
          sources[id] = li.outerHTML;
        }
        return li;
      });
      fresh.remove();
      list.replaceChildren.apply(list, items);
    }
    Array.from(live.children).forEach(function (el) {
      if (el !== list) {
        el.remove();
      }
    });
    live.append(fragment.content);
    localTimes(live);
    live.dataset.updated = String(Date.now());
    if (atEnd) {
      toEnd();
    } else if (added) {
      newer.hidden = false;
    }
  });
  live.dataset.connected = "true";
}

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
  if (live) {
    liveConversation(live);
  }
  localTimes(document);
});
