// Answers as Markdown. Only Markdown's own constructs become elements: HTML written in the text is
// shown as text, and what marked produces is sanitised by DOMPurify on top, so model output can
// never run script, load a picture from elsewhere or style the page.
import { Marked } from "/vendor/marked.js";
import DOMPurify from "/vendor/purify.js";
import hljs from "/vendor/highlight.js";

// Characters that reorder or hide text (right-to-left overrides, isolates, zero-width marks): a file
// named "a\u202Elmth.md" would read "adm.html". Shown as what they are instead.
const INVISIBLE = /[\u00AD\u061C\u180E\u200B-\u200F\u2028-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/g;

/** Text with its reordering and invisible characters made visible (⟨U+202E⟩). */
export function visible(text) {
  return String(text).replace(INVISIBLE, (char) => `⟨U+${char.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`);
}

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
    // Pictures are never loaded (they could carry data out); what they were is said in words.
    image({ text, href }) {
      return escapeHtml(`[picture${text ? `: ${text}` : ""} — ${href}]`);
    },
    checkbox({ checked }) {
      return checked ? "☑ " : "☐ ";
    },
  },
});

// Past this, an answer is shown as plain text: deeply nested Markdown takes marked quadratic time,
// and past some depth its recursion fails.
const MARKDOWN_LIMIT = 100_000;

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName !== "A") return;
  const href = node.getAttribute("href") ?? "";
  // Only web pages: no mail or phone apps, no other protocols, nothing of this server's own or of
  // this machine's (a click would reach them as the user, logged in).
  if (!/^https?:\/\/[^/\\]/i.test(href) || pointsHere(href)) {
    node.removeAttribute("href");
    return;
  }
  // Links open apart from the chat, and tell the site nothing about it.
  node.setAttribute("target", "_blank");
  node.setAttribute("rel", "noopener noreferrer");
  node.setAttribute("title", href);
  // A link whose text is an address shows where it really goes when that is elsewhere.
  const shown = /^\s*(?:https?:\/\/|www\.)([^/\s]+)/i.exec(node.textContent ?? "")?.[1]?.toLowerCase();
  const target = new URL(href).host.toLowerCase();
  if (shown && shown !== target && `www.${shown}` !== target && shown !== `www.${target}`) node.append(` (→ ${target})`);
});

/** Whether a web address names this server or this machine: the page's own host, a loopback or an unspecified address. */
function pointsHere(href) {
  let url;
  try {
    url = new URL(href);
  } catch {
    return true;
  }
  const host = url.hostname.toLowerCase().replace(/^\[|\]$/g, "").replace(/\.$/, "");
  return (
    url.host.toLowerCase() === location.host.toLowerCase() ||
    host === location.hostname.toLowerCase() ||
    host === "localhost" ||
    host.endsWith(".localhost") ||
    /^127\.\d+\.\d+\.\d+$/.test(host) ||
    host === "0.0.0.0" ||
    host === "::1" ||
    host === "::" ||
    /^::ffff:(127\.|7f[0-9a-f]{2}:)/.test(host)
  );
}

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
    element.innerHTML = hljs.highlight(visible(code), { language, ignoreIllegals: true }).value;
    element.className = `hljs language-${language}`;
  } else {
    element.textContent = visible(code);
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

/** Renders Markdown text into `container`, replacing what it held; text it cannot render stays text. */
export function renderMarkdown(container, text) {
  let html = null;
  if (text.length <= MARKDOWN_LIMIT) {
    try {
      html = DOMPurify.sanitize(marked.parse(visible(text)).trim(), PURIFY);
    } catch {
      // Nesting too deep for the parser: the answer is still shown, as it was written.
    }
  }
  if (html === null) {
    container.classList.remove("markdown");
    container.textContent = visible(text);
    return;
  }
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
