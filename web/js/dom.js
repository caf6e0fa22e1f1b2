// dom.js — the one way the page builds its elements.
// Owns: element and SVG factories that set text as Text nodes and
// attributes one by one. Must never: hand a string to the HTML parser
// (no markup properties, no inline event handlers), so no text that comes
// from a message, a card or the log can ever become markup.

const SVG_NS = 'http://www.w3.org/2000/svg';

function setAttributes(el, attrs) {
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) {
      if (typeof value !== 'function') throw new TypeError(`${key} must be a function`);
      el.addEventListener(key.slice(2), value);
    } else if (key === 'class') {
      el.setAttribute('class', value);
    } else if (key === 'text') {
      el.textContent = String(value);
    } else if (key === 'dataset') {
      for (const [name, v] of Object.entries(value)) el.dataset[name] = String(v);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
}

/** Appends children: nodes as they are, anything else as a Text node. */
export function append(el, ...children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** An HTML element: `h('p', {class: 'x'}, 'text', otherNode)`. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttributes(el, attrs);
  return append(el, ...children);
}

/** An SVG element, like `h`. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttributes(el, attrs);
  return append(el, ...children);
}

/** Replaces every child of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, ...children);
}

/** A page-unique id with a readable prefix, for label/aria wiring. */
let counter = 0;
export function uid(prefix) {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** Resolves after `ms` milliseconds, or at once when `signal` aborts. */
export function delay(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}
