// ksmith serve: the page's only script (served from /static/app.js; the CSP allows no other).
// It renders nothing itself: the server sends each section as escaped HTML and this swaps it in,
// keeps the run's page live over server-sent events, and sends the forms' answers as JSON.
"use strict";

function postJson(url, body) {
  return fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    credentials: "same-origin",
    body: JSON.stringify(body),
  }).then(function (r) {
    return r.json().then(function (v) {
      if (!r.ok) { throw new Error(v.error || ("HTTP " + r.status)); }
      return v;
    }, function () { throw new Error("HTTP " + r.status); });
  });
}

function say(el, text) { if (el) { el.textContent = text; } }

function startForm() {
  var form = document.getElementById("start");
  if (!form) { return; }
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var f = form.elements;
    var body = { task: f.task.value, model: f.model.value, interactive: f.interactive.checked };
    if (f.from.value) { body.from = f.from.value; }
    if (f.strategy.value) { body.strategy = f.strategy.value; }
    if (f.iterations.value) { body.iterations = Number(f.iterations.value); }
    if (f.max_nodes.value) { body.max_nodes = Number(f.max_nodes.value); }
    var out = document.getElementById("start-result");
    say(out, "starting…");
    postJson("/runs", body).then(function (v) {
      window.location.assign("/runs/" + encodeURIComponent(v.run));
    }, function (err) { say(out, "not started: " + err.message); });
  });
}

function wireRun(run) {
  document.addEventListener("click", function (e) {
    var t = e.target;
    if (!(t instanceof HTMLElement)) { return; }
    if (t.id === "stop") {
      t.disabled = true;
      postJson("/runs/" + encodeURIComponent(run) + "/stop", {}).catch(function (err) {
        say(document.getElementById("live"), "stop failed: " + err.message);
      });
      return;
    }
    var action = t.getAttribute("data-action");
    var form = document.getElementById("review-form");
    if (!action || !form) { return; }
    var body = { id: form.getAttribute("data-review"), action: action };
    if (action === "edit" || action === "guidance") { body.text = form.elements.text.value; }
    var out = document.getElementById("review-result");
    Array.prototype.forEach.call(form.querySelectorAll("button"), function (b) { b.disabled = true; });
    postJson("/runs/" + encodeURIComponent(run) + "/review", body).then(function () {
      say(out, "sent: " + action + "; the run goes on");
    }, function (err) {
      say(out, "not sent: " + err.message);
      Array.prototype.forEach.call(form.querySelectorAll("button"), function (b) { b.disabled = false; });
    });
  });
}

function liveRun(run) {
  var live = document.getElementById("live");
  var list = document.getElementById("events");
  var review = document.getElementById("review");
  var source = new EventSource("/runs/" + encodeURIComponent(run) + "/events");
  source.addEventListener("open", function () { say(live, "live"); });
  source.addEventListener("engine", function (e) {
    var v = JSON.parse(e.data);
    var li = document.createElement("li");
    li.textContent = "[" + v.t_s.toFixed(1) + " s] " + v.text;
    list.appendChild(li);
  });
  source.addEventListener("state", function (e) {
    var v = JSON.parse(e.data);
    var s = v.sections;
    // The sections are the server's escaped HTML (the same renderer as the first page).
    ["head", "current", "plot", "nodes", "finals"].forEach(function (k) {
      var el = document.getElementById(k);
      if (el && el.innerHTML !== s[k]) { el.innerHTML = s[k]; }
    });
    // The review box is replaced only for a new question, so typing is never lost.
    var id = v.state.review ? v.state.review.id : "";
    if (review.getAttribute("data-review") !== id) {
      review.setAttribute("data-review", id);
      review.innerHTML = s.review;
    }
    document.body.setAttribute("data-status", v.state.status);
  });
  source.addEventListener("problem", function (e) { say(live, "store: " + e.data); });
  source.addEventListener("end", function (e) {
    say(live, "ended: " + e.data);
    document.body.setAttribute("data-ended", "true");
    source.close();
  });
  source.addEventListener("error", function () { say(live, "reconnecting…"); });
}

document.addEventListener("DOMContentLoaded", function () {
  startForm();
  var run = document.body.getAttribute("data-run");
  if (run) {
    wireRun(run);
    liveRun(run);
  }
});
