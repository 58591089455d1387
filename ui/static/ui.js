// inbox ui: the few things a page does better with a script. Every page works without it.
"use strict";

// Live counts: the overview's table is fetched again every data-refresh seconds while the
// page is visible, unless paused.
(function () {
  const button = document.getElementById("live");
  let section = document.getElementById("queues");
  if (!section || !section.dataset.refresh) return;
  let paused = false;
  button.hidden = false;
  button.addEventListener("click", function () {
    paused = !paused;
    button.setAttribute("aria-pressed", String(!paused));
    button.textContent = paused ? "Resume live counts" : "Pause live counts";
  });
  const every = Math.max(2, Number(section.dataset.refresh)) * 1000;
  async function refresh() {
    if (paused || document.hidden) return;
    try {
      const response = await fetch(section.dataset.src, { credentials: "same-origin" });
      if (!response.ok) return;
      const doc = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = doc.getElementById("queues");
      if (fresh) {
        section.replaceWith(fresh);
        section = fresh;
      }
    } catch (e) {
      // The next refresh tries again.
    }
  }
  // While the first count runs the page asks again soon.
  setInterval(refresh, section.querySelector("table") ? every : 2000);
})();

// Selection: a box in the header ticks every row of the page, and the buttons say how many
// rows are ticked.
(function () {
  const all = document.querySelector("input[data-select-all]");
  const boxes = Array.from(document.querySelectorAll('input[name="id"][type="checkbox"]'));
  const shown = document.querySelector("[data-selected-count]");
  if (!boxes.length) return;
  function update() {
    const n = boxes.filter(function (b) { return b.checked; }).length;
    if (shown) shown.textContent = n === 1 ? "1 row selected" : n + " rows selected";
    if (all) {
      all.checked = n === boxes.length;
      all.indeterminate = n > 0 && n < boxes.length;
    }
  }
  if (all) {
    all.hidden = false;
    all.addEventListener("change", function () {
      boxes.forEach(function (b) { b.checked = all.checked; });
      update();
    });
  }
  boxes.forEach(function (b) { b.addEventListener("change", update); });
  update();
})();
