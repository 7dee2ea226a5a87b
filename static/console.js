// Small enhancements of the console; every page also works without them.
(function () {
  "use strict";
  const PAUSE_KEY = "console.live.paused";

  function paused() {
    return window.localStorage.getItem(PAUSE_KEY) === "1";
  }

  function showLiveState(button) {
    const isPaused = paused();
    button.setAttribute("aria-pressed", isPaused ? "false" : "true");
    button.textContent = isPaused ? "Resume live refresh" : "Pause live refresh";
    document.querySelectorAll("[data-live]").forEach(function (element) {
      element.classList.toggle("paused", isPaused);
    });
  }

  // A page answered to a form (a 409, a refused login) stands for a GET page:
  // show that address, so a reload reads it instead of sending the form again.
  const getUrl = document.querySelector('meta[name="console-get-url"]');
  if (getUrl && window.history.replaceState) {
    window.history.replaceState(null, "", getUrl.getAttribute("content"));
  }

  document.addEventListener("DOMContentLoaded", function () {
    const button = document.getElementById("live-toggle");
    if (button) {
      button.hidden = false;
      showLiveState(button);
      button.addEventListener("click", function () {
        window.localStorage.setItem(PAUSE_KEY, paused() ? "0" : "1");
        showLiveState(button);
      });
    }
    document.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.dataset.confirm)) {
          event.preventDefault();
        }
      });
    });
  });

  // A paused live region skips its polling requests.
  document.addEventListener("htmx:beforeRequest", function (event) {
    const element = event.detail.elt;
    if (element && element.hasAttribute("data-live") && paused()) {
      event.preventDefault();
    }
  });

  // Disable a submit button once its form is sent, so a double click sends once.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (event.defaultPrevented) {
      return;
    }
    window.setTimeout(function () {
      form.querySelectorAll("button[type=submit]").forEach(function (button) {
        button.disabled = true;
      });
    }, 0);
  });
})();
