"""``/docs``: Swagger UI where its script can be fetched, else a reference read from
``/openapi.json`` by this page's own script.

FastAPI's page loads Swagger UI from a CDN (cdn.jsdelivr.net): on a laptop or a server without
internet access, which is where the embedded default runs, ``/docs`` stayed blank. This page
asks for Swagger UI's script and, where it fails to load or has not loaded within
``SWAGGER_WAIT_MS``, shows every route, parameter, body, answer and schema of the spec instead,
built with the DOM (the spec's text is never parsed as HTML). Swagger UI's stylesheet is asked
for only once its script has loaded: a stylesheet in the head that the network holds up holds
the page's rendering up with it.
"""

from __future__ import annotations

import json
import re

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse

SWAGGER_JS = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js"
SWAGGER_CSS = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css"
SWAGGER_WAIT_MS = 4000

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #1b1b1b; }
#facet-loading, #facet-reference { max-width: 72rem; margin: 0 auto; padding: 1rem 1.5rem; }
#facet-reference h1 { margin-bottom: .2rem; }
#facet-reference .why { background: #fff7e0; border: 1px solid #e8d08a; padding: .5rem .8rem; }
#facet-reference details { border: 1px solid #ccc; border-radius: 4px; margin: .4rem 0; }
#facet-reference summary { cursor: pointer; padding: .4rem .6rem; }
#facet-reference details > div { padding: 0 .8rem .6rem; }
#facet-reference .method { display: inline-block; min-width: 4.2rem; font-weight: bold; }
#facet-reference .text { white-space: pre-wrap; }
#facet-reference table { border-collapse: collapse; margin: .3rem 0; }
#facet-reference th, #facet-reference td { border: 1px solid #ddd; padding: .2rem .5rem;
  text-align: left; vertical-align: top; }
#facet-reference code { background: #f3f3f3; padding: 0 .2rem; overflow-wrap: anywhere; }
#facet-reference .scroll { overflow-x: auto; }
#facet-reference td { overflow-wrap: anywhere; }
#facet-reference summary h3 { display: inline; font-size: 1rem; font-weight: normal; margin: 0; }
"""

# The reference's script: everything from the spec goes in as text (textContent), never as HTML.
_SCRIPT = r"""
(function () {
  const SPEC = __SPEC__, JS = __JS__, CSS = __CSS__, WAIT_MS = __WAIT__;
  const loading = document.getElementById("facet-loading");
  const ref = document.getElementById("facet-reference");
  let shown = false;

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }
  function refName(ref) { return ref.split("/").pop(); }
  function typeOf(schema) {
    const span = el("span");
    if (!schema) { span.textContent = "any"; return span; }
    if (schema.$ref) {
      const a = el("a", refName(schema.$ref));
      a.href = "#schema-" + refName(schema.$ref);
      span.appendChild(a);
      return span;
    }
    const alts = schema.anyOf || schema.oneOf || schema.allOf;
    if (alts) {
      alts.forEach(function (alt, i) {
        if (i) span.appendChild(document.createTextNode(schema.allOf ? " & " : " | "));
        span.appendChild(typeOf(alt));
      });
      return span;
    }
    if (schema.type === "array" && schema.prefixItems) {  // (a tuple)
      span.appendChild(document.createTextNode("["));
      schema.prefixItems.forEach(function (item, i) {
        if (i) span.appendChild(document.createTextNode(", "));
        span.appendChild(typeOf(item));
      });
      span.appendChild(document.createTextNode("]"));
      return span;
    }
    if (schema.type === "array") {
      span.appendChild(document.createTextNode("array of "));
      span.appendChild(typeOf(schema.items));
      return span;
    }
    if (schema.additionalProperties && typeof schema.additionalProperties === "object"
        && !schema.properties) {  // (a mapping)
      span.appendChild(document.createTextNode("object of string to "));
      span.appendChild(typeOf(schema.additionalProperties));
      return span;
    }
    let text = [].concat(schema.type || (schema.const !== undefined ? "const" : "object")).join(" | ");
    if (schema.enum) text += " (" + schema.enum.map(function (v) { return JSON.stringify(v); }).join(", ") + ")";
    if (schema.const !== undefined) text += " " + JSON.stringify(schema.const);
    if (schema.format) text += " <" + schema.format + ">";
    span.textContent = text;
    return span;
  }
  const LIMITS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                  "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems",
                  "minProperties", "maxProperties"];
  function limits(schema) {
    // Its own, and those of the branches of an optional field (pydantic puts the limits of
    // "X | None" inside the X branch).
    const said = [];
    function collect(s) {
      if (!s) return;
      LIMITS.forEach(function (k) {
        if (s[k] !== undefined) said.push(k + " " + (k === "pattern" ? s[k] : JSON.stringify(s[k])));
      });
      (s.anyOf || s.oneOf || []).forEach(collect);
    }
    collect(schema);
    if (schema && schema.default !== undefined) said.push("default " + JSON.stringify(schema.default));
    if (schema && schema.additionalProperties === false) said.push("no other fields");
    if (schema && schema.deprecated) said.push("deprecated");
    return said.join("; ");
  }
  function table(head, rows) {
    const t = el("table"), tr = el("tr");
    head.forEach(function (h) { tr.appendChild(el("th", h)); });
    t.appendChild(tr);
    rows.forEach(function (cells) {
      const row = el("tr");
      cells.forEach(function (c) {
        const td = el("td");
        if (c instanceof Node) td.appendChild(c); else td.textContent = c === undefined ? "" : String(c);
        row.appendChild(td);
      });
      t.appendChild(row);
    });
    const box = el("div", null, "scroll");  // (a wide table scrolls, not the page)
    box.appendChild(t);
    return box;
  }
  function content(body) {
    const box = el("div");
    Object.keys(body.content || {}).forEach(function (type) {
      const p = el("p");
      p.appendChild(el("code", type));
      p.appendChild(document.createTextNode(": "));
      p.appendChild(typeOf(body.content[type].schema));
      box.appendChild(p);
    });
    return box;
  }
  function operation(path, method, op) {
    const d = el("details");
    d.id = "op-" + (op.operationId || method + path);
    const s = el("summary");
    const h = el("h3");  // (reached by a screen reader's heading navigation)
    h.appendChild(el("span", method.toUpperCase(), "method"));
    h.appendChild(el("code", path));
    if (op.summary) h.appendChild(document.createTextNode(" \u2014 " + op.summary));
    if (op.deprecated) h.appendChild(document.createTextNode(" (deprecated)"));
    s.appendChild(h);
    d.appendChild(s);
    const box = el("div");
    if (op.description) box.appendChild(el("p", op.description, "text"));
    if (op.security && op.security.some(function (r) { return Object.keys(r).length; })) {
      box.appendChild(el("p", op.security.some(function (r) { return !Object.keys(r).length; })
        ? "Authorization: Bearer <FACET_API_KEY> where the server has a key."
        : "Needs Authorization: Bearer <FACET_API_KEY>."));
    }
    if (op.parameters && op.parameters.length) {
      box.appendChild(el("h4", "Parameters"));
      box.appendChild(table(["name", "in", "type", "required", "limits", "description"],
        op.parameters.map(function (p) {
          return [p.name, p.in, typeOf(p.schema), p.required ? "yes" : "", limits(p.schema),
                  p.description || (p.schema && p.schema.description) || ""];
        })));
    }
    if (op.requestBody) {
      box.appendChild(el("h4", "Request body" + (op.requestBody.required ? " (required)" : "")));
      box.appendChild(content(op.requestBody));
    }
    if (op.responses) {
      box.appendChild(el("h4", "Responses"));
      box.appendChild(table(["status", "description", "body", "headers"],
        Object.keys(op.responses).map(function (code) {
          const r = op.responses[code];
          const headers = el("div");
          Object.keys(r.headers || {}).forEach(function (name) {
            const line = el("p");
            line.appendChild(el("code", name));
            const said = r.headers[name].description;
            if (said) line.appendChild(document.createTextNode(": " + said));
            headers.appendChild(line);
          });
          return [code, r.description || "", content(r), headers];
        })));
    }
    d.appendChild(box);
    return d;
  }
  function schemaBlock(name, schema) {
    const d = el("details");
    d.id = "schema-" + name;
    d.appendChild(el("summary")).appendChild(el("h3")).appendChild(el("code", name));
    const box = el("div");
    if (schema.description) box.appendChild(el("p", schema.description, "text"));
    const props = schema.properties || {};
    const required = schema.required || [];
    if (Object.keys(props).length) {
      box.appendChild(table(["field", "type", "required", "limits", "description"],
        Object.keys(props).map(function (k) {
          const p = props[k];
          return [k, typeOf(p), required.indexOf(k) >= 0 ? "yes" : "", limits(p), p.description || ""];
        })));
    } else {
      box.appendChild(typeOf(schema));
    }
    d.appendChild(box);
    return d;
  }
  // A link to an operation or a schema opens it (a closed <details> hides its target) and
  // moves the focus there: followed, clicked again after it was closed, or on the page's load.
  function reveal(hash) {
    let id = "";
    try { id = decodeURIComponent(hash.slice(1)); } catch (e) { return; }  // (a malformed link)
    const target = id && document.getElementById(id);
    if (!target || target.tagName !== "DETAILS") return;
    target.open = true;
    target.scrollIntoView();
    target.querySelector("summary").focus();
  }
  window.addEventListener("hashchange", function () { reveal(location.hash); });
  ref.addEventListener("click", function (event) {
    const link = event.target.closest && event.target.closest("a[href^='#']");
    if (link && link.getAttribute("href") === location.hash) reveal(location.hash);
  });

  function render(spec, why) {
    const info = spec.info || {};
    ref.appendChild(el("h1", (info.title || "API") + " " + (info.version || "")));
    ref.appendChild(el("p", why, "why"));
    const links = el("p");
    const raw = el("a", "openapi.json");
    raw.href = SPEC;
    links.appendChild(document.createTextNode("The whole description, for clients and tools: "));
    links.appendChild(raw);
    ref.appendChild(links);
    if (info.description) ref.appendChild(el("p", info.description, "text"));
    const tags = (spec.tags || []).map(function (t) { return t.name; });
    const byTag = {};
    Object.keys(spec.paths || {}).forEach(function (path) {
      Object.keys(spec.paths[path]).forEach(function (method) {
        const op = spec.paths[path][method];
        if (typeof op !== "object" || !op.responses) return;
        const tag = (op.tags && op.tags[0]) || "other";
        if (tags.indexOf(tag) < 0) tags.push(tag);
        (byTag[tag] = byTag[tag] || []).push(operation(path, method, op));
      });
    });
    tags.forEach(function (tag) {
      if (!byTag[tag]) return;
      const section = el("section");
      section.appendChild(el("h2", tag));
      const described = (spec.tags || []).filter(function (t) { return t.name === tag; })[0];
      if (described && described.description) section.appendChild(el("p", described.description, "text"));
      byTag[tag].forEach(function (d) { section.appendChild(d); });
      ref.appendChild(section);
    });
    const schemas = (spec.components || {}).schemas || {};
    if (Object.keys(schemas).length) {
      const section = el("section");
      section.id = "schemas";
      section.appendChild(el("h2", "Schemas"));
      Object.keys(schemas).sort().forEach(function (name) {
        section.appendChild(schemaBlock(name, schemas[name]));
      });
      ref.appendChild(section);
    }
  }
  function reference(why) {
    if (shown) return;
    shown = true;
    loading.hidden = true;
    ref.hidden = false;
    fetch(SPEC).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    }).then(function (spec) { render(spec, why); reveal(location.hash); }, function (e) {
      ref.appendChild(el("p", why + " Nor could " + SPEC + " be read: " + e.message, "why"));
    });
  }

  const timer = setTimeout(function () {
    reference("Swagger UI had not loaded from " + new URL(JS).host + " within " + WAIT_MS / 1000 +
              " s (no internet access?): this is the server's own reference of its API.");
  }, WAIT_MS);
  const script = document.createElement("script");
  script.src = JS;
  script.onerror = function () {
    clearTimeout(timer);
    reference("Swagger UI could not be loaded from " + new URL(JS).host +
              " (no internet access?): this is the server's own reference of its API.");
  };
  script.onload = function () {
    clearTimeout(timer);
    if (shown || typeof window.SwaggerUIBundle !== "function") {
      reference("Swagger UI's script loaded late or broken: this is the server's own reference.");
      return;
    }
    try {
      window.ui = window.SwaggerUIBundle({
        url: SPEC, dom_id: "#swagger-ui", layout: "BaseLayout", deepLinking: true,
        showExtensions: true, showCommonExtensions: true,
        presets: [window.SwaggerUIBundle.presets.apis, window.SwaggerUIBundle.SwaggerUIStandalonePreset],
      });
    } catch (e) {
      reference("Swagger UI failed to start (" + e.message + "): this is the server's own reference.");
      return;
    }
    const css = document.createElement("link");
    css.rel = "stylesheet";
    css.href = CSS;
    document.head.appendChild(css);
    loading.hidden = true;
  };
  document.head.appendChild(script);
})();
"""


def _js(value: object) -> str:
    """``value`` as a JavaScript literal inside a <script> element (no "<": neither "</script>"
    nor "<!--" can end or change it)."""
    return json.dumps(value).replace("<", "\\u003c")


def docs_html(openapi_url: str, title: str) -> str:
    """The page, reading the spec at ``openapi_url`` (the root path included)."""
    values = {"__SPEC__": _js(openapi_url), "__JS__": _js(SWAGGER_JS),
              "__CSS__": _js(SWAGGER_CSS), "__WAIT__": str(SWAGGER_WAIT_MS)}
    # (one pass: a root path that holds "__JS__" is not filled in again)
    script = re.sub("|".join(values), lambda m: values[m.group(0)], _SCRIPT)
    escaped = _attribute(title)
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1.0\">\n"
            f"<title>{escaped} - API</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            f"<p id=\"facet-loading\">Loading Swagger UI\u2026</p>\n<div id=\"swagger-ui\"></div>\n"
            f"<main id=\"facet-reference\" hidden></main>\n"
            f"<noscript><p>This page needs JavaScript; the API's description is at "
            f"<a href=\"{_attribute(openapi_url)}\">openapi.json</a>.</p></noscript>\n"
            f"<script>{script}</script>\n</body>\n</html>\n")


def _attribute(text: str) -> str:
    """``text`` inside a double-quoted HTML attribute."""
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def install(app: FastAPI) -> None:
    """Serve the page at ``/docs`` (the app made with ``docs_url=None``), as FastAPI's own: a
    plain route (outside the spec, and outside the app's check of query parameters, so a link
    that carries one still opens it), without the key, reading the spec under the request's
    root path."""

    async def docs(request: Request) -> HTMLResponse:
        root = str(request.scope.get("root_path", "")).rstrip("/")
        return HTMLResponse(docs_html(root + (app.openapi_url or "/openapi.json"), app.title))

    app.add_route("/docs", docs, methods=["GET"], include_in_schema=False)
