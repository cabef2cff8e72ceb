// Answers as Markdown. Only Markdown's own constructs become elements: HTML written in the text is
// shown as text, and what marked produces is sanitised by DOMPurify on top, so model output can
// never run script, load a picture from elsewhere or style the page.
import { Marked } from "/vendor/marked.js";
import DOMPurify from "/vendor/purify.js";
import hljs from "/vendor/highlight.js";

const escapeHtml = (text) => text.replace(/[&<>"']/g, (char) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[char]);

const marked = new Marked({
  gfm: true,
  async: false,
  renderer: {
    html({ text }) {
      return escapeHtml(text);
    },
    // The fence's language goes in a data attribute, which survives sanitising (classes do not).
    code({ text, lang }) {
      const language = (lang ?? "").split(/\s/)[0];
      return `<pre><code data-language="${escapeHtml(language)}">${escapeHtml(text)}</code></pre>`;
    },
  },
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  // Links open apart from the chat, and tell the site nothing about it.
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

const PURIFY = { USE_PROFILES: { html: true }, FORBID_TAGS: ["img", "svg", "math", "style", "form", "input", "button", "textarea", "select", "iframe", "video", "audio", "source"], FORBID_ATTR: ["style", "class", "id"] };

/** The highlight.js language for a file name, or null when it has none (then the text stays plain). */
export function languageOf(path) {
  const name = String(path).split("/").at(-1) ?? "";
  const known = { dockerfile: "dockerfile", makefile: "makefile" }[name.toLowerCase()];
  if (known) return known;
  const extension = name.includes(".") ? name.split(".").at(-1).toLowerCase() : "";
  return extension && hljs.getLanguage(extension) ? extension : null;
}

/** Code as a `pre` element, coloured by the real grammar of its language (plain when there is none). */
export function codeBlock(code, language, className) {
  const pre = document.createElement("pre");
  if (className) pre.className = className;
  const element = document.createElement("code");
  if (language && hljs.getLanguage(language)) {
    // highlight.js escapes the code it is given; its markup is only its own spans.
    element.innerHTML = hljs.highlight(code, { language, ignoreIllegals: true }).value;
    element.className = `hljs language-${language}`;
  } else {
    element.textContent = code;
  }
  pre.append(element);
  addCopyButton(pre, () => code);
  return pre;
}

/** A button that copies what a block holds. */
export function addCopyButton(container, text) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "copy";
  button.textContent = "Copy";
  button.setAttribute("aria-label", "Copy to the clipboard");
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text());
      button.textContent = "Copied";
    } catch {
      button.textContent = "Copy failed";
    }
    setTimeout(() => (button.textContent = "Copy"), 1500);
  });
  container.classList.add("copyable");
  container.append(button);
}

/** Renders Markdown text into `container`, replacing what it held. */
export function renderMarkdown(container, text) {
  const html = DOMPurify.sanitize(marked.parse(text).trim(), PURIFY);
  container.innerHTML = html;
  container.classList.add("markdown");
  // Fenced code: coloured by the language the fence names, with a copy button.
  for (const code of container.querySelectorAll("pre > code")) {
    const fence = code.getAttribute("data-language") || null;
    const pre = code.parentElement;
    pre.replaceWith(codeBlock(code.textContent ?? "", fence));
  }
}

export { hljs };
