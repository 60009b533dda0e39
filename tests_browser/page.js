// What the student sees in the open notebook, read from JupyterLab's page (read-only queries).
// Installed as window.__lesson by student.py; every function looks at the one visible notebook panel.
({
  panel() {
    const shown = [...document.querySelectorAll(".jp-NotebookPanel")].filter(
      (p) => !p.classList.contains("lm-mod-hidden"));
    return shown.length === 1 ? shown[0] : null;
  },

  cells() {
    const panel = this.panel();
    return panel ? [...panel.querySelectorAll(".jp-Notebook .jp-Cell")] : [];
  },

  // Kernel status, every code cell's prompt ("[3]:", "[*]:", "[ ]:") and any open dialog.
  state() {
    const panel = this.panel();
    const indicator = panel && panel.querySelector(".jp-Notebook-ExecutionIndicator");
    const dialog = document.querySelector(".jp-Dialog");
    const prompts = this.cells().map((c, i) => c.classList.contains("jp-CodeCell")
      ? { index: i, prompt: (c.querySelector(".jp-InputPrompt") || {}).textContent || "" } : null)
      .filter((p) => p !== null);
    return {
      found: panel !== null,
      status: indicator ? indicator.dataset.status : "",
      prompts,
      dialog: dialog ? dialog.innerText.slice(0, 500) : "",
      loadingWidgets: panel ? [...panel.querySelectorAll(".jp-OutputArea-output")]
        .filter((o) => o.textContent.trim() === "Loading widget...").length : 0,
    };
  },

  // Every output of every code cell, nested ones (inside an Output widget) included.
  async report() {
    const images = this.cells().flatMap((c) => [...c.querySelectorAll(".jp-Cell-outputArea img")]);
    await Promise.race([Promise.all(images.map((img) => img.decode().catch(() => null))),
                        new Promise((done) => setTimeout(done, 10000))]);
    const clip = (t) => (t.length > 4000 ? t.slice(0, 2000) + "\n...\n" + t.slice(-2000) : t);
    return this.cells().map((c, i) => {
      if (!c.classList.contains("jp-CodeCell")) return null;
      const area = c.querySelector(".jp-Cell-outputArea");
      const outputs = area ? [...area.querySelectorAll(".jp-OutputArea-output")].map((o) => {
        const mime = o.dataset.mimeType || "";
        return {
          mime: mime || "widget",
          text: clip(mime.startsWith("image/") ? "" : o.innerText || o.textContent),
          nested: o.parentElement.closest(".widget-output") !== null,
          rendered: mime ? true : o.querySelector(".jupyter-widgets") !== null,
        };
      }) : [];
      const imgs = area ? [...area.querySelectorAll("img")].map((img) => ({
        complete: img.complete, width: img.naturalWidth, height: img.naturalHeight,
      })) : [];
      const sliders = area ? area.querySelectorAll(".widget-slider [role=slider]").length : 0;
      return { index: i, prompt: (c.querySelector(".jp-InputPrompt") || {}).textContent || "",
               outputs, imgs, sliders };
    }).filter((c) => c !== null);
  },

  // The sliders, in page order: the cell each is in, its label and its value. The value is read from
  // the readout (the slider's own number format) when shown: aria-valuenow is rounded to one decimal.
  sliders() {
    return this.cells().flatMap((c, i) => [...c.querySelectorAll(".widget-slider [role=slider]")].map((h) => {
      const box = h.closest(".widget-slider") || c;
      const readout = box.querySelector(".widget-readout");
      return {
        cell: i,
        label: (box.querySelector(".widget-label") || {}).textContent || "",
        value: (readout && readout.textContent.trim()) || h.getAttribute("aria-valuenow"),
        atMax: h.getAttribute("aria-valuenow") === h.getAttribute("aria-valuemax"),
      };
    }));
  },

  sliderHandle(k) {
    return this.cells().flatMap((c) => [...c.querySelectorAll(".widget-slider [role=slider]")])[k];
  },

  // Every picture each output slot has shown during the run, as it is redrawn in place (a live plot):
  // watch() records them, imageHistory() lists { cell, output, distinct } per slot that held an image.
  watch() {
    if (this._seen) return;
    this._seen = new Map();
    const note = (img) => {
      const cell = img.closest(".jp-Cell");
      const child = img.closest(".jp-OutputArea-child");
      if (!cell || !child || !img.src) return;
      const index = this.cells().indexOf(cell);
      const slot = [...child.parentElement.children].indexOf(child);
      const key = `${index}:${slot}`;
      if (!this._seen.has(key)) this._seen.set(key, new Set());
      let h = 2166136261;
      for (let i = 0; i < img.src.length; i++) h = Math.imul(h ^ img.src.charCodeAt(i), 16777619) >>> 0;
      this._seen.get(key).add(`${img.src.length}:${h}`);
    };
    new MutationObserver((records) => {
      for (const r of records) {
        if (r.type === "attributes" && r.target.tagName === "IMG") note(r.target);
        for (const n of r.addedNodes || []) {
          if (n.nodeType !== 1) continue;
          if (n.tagName === "IMG") note(n);
          n.querySelectorAll && n.querySelectorAll("img").forEach(note);
        }
      }
    }).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ["src"] });
  },

  imageHistory() {
    return [...(this._seen || new Map()).entries()].map(([key, srcs]) => {
      const [cell, output] = key.split(":").map(Number);
      return { cell, output, distinct: srcs.size };
    });
  },

  // A fingerprint of everything the outputs show except the sliders themselves (their readouts move
  // with the handle): text, images, widget HTML and canvases.
  signature() {
    const shown = ".jp-RenderedText, .jp-RenderedImage, .jp-RenderedHTMLCommon, .jp-RenderedSVG, " +
                  ".jp-RenderedLatex, .widget-html-content, .widget-image, .widget-label, canvas";
    const parts = this.cells().flatMap((c) => [...c.querySelectorAll(".jp-Cell-outputArea")])
      .flatMap((a) => [...a.querySelectorAll(shown)])
      .filter((e) => !e.closest(".widget-slider"))
      .map((e) => e.tagName === "IMG" ? e.src : e.tagName === "CANVAS" ? e.toDataURL()
        : e.textContent + [...e.querySelectorAll("img")].map((img) => img.src).join("|"));
    let h = 2166136261;                                   // FNV-1a over the joined text
    const s = parts.join("\u0001");
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0;
    return `${parts.length}:${s.length}:${h}`;
  },
})
