// practicegw console: small enhancements. Every page works without this.
(function () {
  "use strict";

  // Copy buttons: <button data-copy="element-id">.
  document.addEventListener("click", function (e) {
    var b = e.target.closest("[data-copy]");
    if (!b) return;
    var el = document.getElementById(b.getAttribute("data-copy"));
    if (!el) return;
    var text = el.value !== undefined ? el.value : el.textContent;
    var done = function () {
      b.textContent = "Copied";
      setTimeout(function () { b.textContent = "Copy"; }, 2000);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { el.select(); });
    } else {
      el.select();
      try { document.execCommand("copy"); done(); } catch (_) { /* the text stays selected */ }
    }
  });

  // The step before a vendor's consent page goes on by itself: a link
  // rather than a redirect, since forms may lead only to the console.
  var follow = document.querySelector("a[data-follow]");
  if (follow) {
    location.assign(follow.href);
  }

  // Pages that wait on something refresh themselves for a while.
  var auto = document.querySelector("[data-autorefresh]");
  if (auto) {
    setTimeout(function () { location.reload(); }, Number(auto.getAttribute("data-autorefresh")) * 1000);
  }

  // Explorer: filter the route list.
  var filter = document.getElementById("op-filter");
  if (filter) {
    filter.addEventListener("input", function () {
      var q = filter.value.toLowerCase();
      document.querySelectorAll("[data-op-text]").forEach(function (li) {
        li.hidden = q !== "" && li.getAttribute("data-op-text").toLowerCase().indexOf(q) < 0;
      });
    });
  }

  // Explorer: say when the body is not JSON.
  var body = document.getElementById("body");
  var hint = document.getElementById("body-hint");
  if (body && hint) {
    body.addEventListener("input", function () {
      var v = body.value.trim();
      try { if (v) JSON.parse(v); hint.hidden = true; } catch (_) { hint.hidden = false; }
    });
  }

  // Explorer: send without leaving the page. The server relays the
  // request with the session's sandbox credential and answers JSON.
  var form = document.getElementById("explorer-form");
  var out = document.getElementById("response");
  if (!form || !out) return;

  function el(tag, cls, text) {
    var n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined) n.textContent = text;
    return n;
  }

  function show(r) {
    out.replaceChildren();
    out.hidden = false;
    if (r.problem) {
      var p = el("div", "flash bad", r.problem);
      p.id = "response-problem";
      out.append(p);
      return;
    }
    var head = el("div", "resp-head");
    var status = el("span", "code " + r.class, r.status_text);
    status.id = "response-status";
    head.append(status, " ", el("code", "", r.method + " " + r.url), " ", el("span", "muted small", r.duration_ms + " ms"));
    var det = el("details", "headers");
    det.append(el("summary", "", "Response headers (" + (r.headers || []).length + ")"));
    var table = el("table", "kv");
    (r.headers || []).forEach(function (h) {
      var tr = el("tr");
      var th = el("th", "", h[0]);
      th.scope = "row";
      tr.append(th, el("td", "mono", h[1]));
      table.append(tr);
    });
    det.append(table);
    var pre = el("pre", "json", r.body);
    pre.id = "response-body";
    out.append(head, det, pre);
    if (r.truncated) out.append(el("p", "small muted", "The body was cut at 2 MiB."));
    if (r.credential) {
      var cred = document.getElementById("explorer-credential");
      if (cred) cred.textContent = r.credential;
    }
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var btn = document.getElementById("send");
    btn.disabled = true;
    btn.textContent = "Sending…";
    fetch(form.action, {
      method: "POST",
      body: new URLSearchParams(new FormData(form)),
      headers: { "Accept": "application/json" },
      credentials: "same-origin"
    }).then(function (res) {
      var type = res.headers.get("Content-Type") || "";
      if (type.indexOf("application/json") < 0) {
        if (res.redirected) {
          // Signed out: the sign-in page says why.
          location.assign(res.url);
          return null;
        }
        return { problem: "The console refused the request (" + res.status + "). Reload the page and try again." };
      }
      return res.json();
    }).then(function (r) {
      if (r) {
        show(r);
        out.scrollIntoView({ behavior: "smooth", block: "nearest" });
      }
    }).catch(function (err) {
      show({ problem: "The request could not be sent: " + err.message });
    }).finally(function () {
      btn.disabled = false;
      btn.textContent = "Send to the sandbox";
    });
  });
})();
