/* vllm-compat site: filters, permalinks, release selectors and the off-screen cue.
 * The pages hold every status, cause and fix without this script. It adds what would make
 * them heavy if written into every cell: each index entry's id and link to its recipe cell,
 * and each recipe cell's permalink, computed from the row and column a cell sits in
 * (tr data-slug or the row header's feature mode, th data-slug / data-st or its text), as
 * compat.emit.site.cell_id writes them; and on a recipe page, each text a note cites from
 * "Said once" (a finding, error, command or cause written once per page), shown in place.
 * State lives in the URL fragment so any view can be linked:
 *   index.html#status=blocked&strategy=multi_node_tp_pp   (filters; values may be comma lists)
 *   index.html#release=0.33.0&status=blocked              (the index of one release: its
 *                                                          page, or index.html narrowed)
 *   index.html#cell-zai-org-glm-5.2-multi_node_tp_pp-spec_decoding-mtp   (scroll to a cell)
 *   recipes/zai-org/GLM-5.2.html#release=0.33.0&cell=cell-...           (release + cell)
 * A classic script (not a module) because module scripts do not load from file://. */
(function () {
  "use strict";
  var KEYS = ["q", "provider", "strategy", "feature", "status", "release", "cell"];
  var each = function (list, fn) { Array.prototype.forEach.call(list, fn); };
  var toArray = function (list) { return Array.prototype.slice.call(list); };

  function parseHash() {
    var raw = location.hash.replace(/^#/, "");
    var state = {};
    if (!raw) return state;
    if (raw.indexOf("=") < 0) {
      state.target = decodeURIComponent(raw);
      return state;
    }
    raw.split("&").forEach(function (pair) {
      var i = pair.indexOf("=");
      if (i < 0) return;
      var k = decodeURIComponent(pair.slice(0, i));
      var v = decodeURIComponent(pair.slice(i + 1).replace(/\+/g, " "));
      if (KEYS.indexOf(k) >= 0 && v) state[k] = v;
    });
    if (state.cell) state.target = state.cell;
    return state;
  }

  function formatHash(state) {
    var parts = [];
    KEYS.forEach(function (k) {
      if (state[k]) {
        parts.push(k + "=" + encodeURIComponent(state[k]).replace(/%2C/g, ",").replace(/%3A/gi, ":"));
      }
    });
    return parts.length ? "#" + parts.join("&") : "";
  }

  function setHash(hash) {
    var url = location.href.replace(/#.*$/, "") + hash;
    try {
      history.replaceState(null, "", url);
    } catch (e) {
      location.hash = hash; /* some file:// setups refuse replaceState */
    }
  }

  function list(value) {
    return value ? value.split(",").filter(Boolean) : [];
  }

  /* compat.emit.site._slug and fm_slug, for a feature mode label ("base", "f", "f:mode") */
  function slug(text) {
    return text.toLowerCase().replace(/[^a-z0-9._]+/g, "-").replace(/^-+|-+$/g, "");
  }

  function fmSlug(label) {
    if (label === "base") return "base";
    var i = label.indexOf(":");
    if (i < 0) return slug(label) || "base";
    return (slug(label.slice(0, i)) || "base") + "-" + slug(label.slice(i + 1));
  }

  function statusOf(el) {
    var m = /(?:^|\s)s-(\w+)/.exec(el.className);
    return m ? m[1] : "";
  }

  function highlight(els) {
    each(document.querySelectorAll(".hl"), function (el) { el.classList.remove("hl"); });
    els.forEach(function (el) { el.classList.add("hl"); });
    if (els.length) {
      els[0].scrollIntoView({ block: "center", inline: "center" });
      var focusable = els[0].querySelector("a") || els[0];
      if (focusable.focus) focusable.focus({ preventScroll: true });
    }
  }

  /* ------------------------------------------------------------------ index */

  /* An entry's feature mode: its leading text, which may hold <wbr> break chances. */
  function labelOf(li) {
    var text = "";
    for (var node = li.firstChild; node; node = node.nextSibling) {
      if (node.nodeType === 3) text += node.nodeValue;
      else if (node.nodeName !== "WBR") break;
    }
    return text.trim();
  }

  /* An entry with data-h="n" has the title and hint of the row's n-th distinct one, which the
   * page writes once (compat.emit.site._said_once_per_row). */
  function showRowHints(tr) {
    var said = [];
    each(tr.querySelectorAll("li.e"), function (li) {
      var n = li.dataset.h;
      if (n) {
        var from = said[Number(n) - 1];
        if (!from) return;
        if (from.title) li.title = from.title;
        var small = from.querySelector("small");
        if (small) li.appendChild(small.cloneNode(true));
      } else if (li.title || li.querySelector("small")) {
        said.push(li);
      }
    });
  }

  /* Give every entry its id, status, label and a link to its cell on the recipe page. */
  function linkEntries(table) {
    var heads = toArray(table.querySelectorAll("thead th[data-strategy]"));
    var entries = [];
    each(table.querySelectorAll("tr.r"), function (tr) {
      showRowHints(tr);
      var link = tr.querySelector("th a");
      var href = link.getAttribute("href");
      tr.dataset.provider = tr.closest("tbody").dataset.provider;
      /* what the search matches: provider, name, model id (the row's first small) and the rest */
      tr.dataset.q = [tr.dataset.provider, link.textContent, tr.querySelector("th small").textContent,
        tr.dataset.q].join(" ").toLowerCase();
      each(tr.querySelectorAll("td"), function (td, i) {
        var head = heads[i];
        if (!head) return;
        td.setAttribute("data-strategy", head.dataset.strategy);
        each(td.querySelectorAll("li.e"), function (li) {
          var label = labelOf(li);
          var id = "cell-" + tr.dataset.slug + "-" + head.dataset.slug + "-" + fmSlug(label);
          li.id = id;
          li.dataset.k = label;
          li.dataset.s = statusOf(li);
          var a = document.createElement("a");
          a.href = href + "#" + id;
          while (li.firstChild) a.appendChild(li.firstChild);
          li.appendChild(a);
          entries.push(li);
        });
      });
    });
    return entries;
  }

  /* "N blocked off-screen": blocked entries the scroll box hides to the left or right. */
  function offscreenCue(wrap, table, box) {
    var cues = { "-1": box.querySelector(".offscreen.left"), "1": box.querySelector(".offscreen.right") };
    var pending = false;
    var found = { "-1": [], "1": [] };

    function measure() {
      pending = false;
      var rect = wrap.getBoundingClientRect();
      var head = table.querySelector("thead th.rh");
      var from = head ? head.getBoundingClientRect().right : rect.left;
      var to = rect.left + wrap.clientLeft + wrap.clientWidth;
      found = { "-1": [], "1": [] };
      each(table.querySelectorAll("li.e.s-blocked"), function (li) {
        if (li.offsetParent === null) return; /* filtered out */
        var r = li.getBoundingClientRect();
        if (r.right > to + 1) found["1"].push(li);
        else if (r.left < from - 1) found["-1"].push(li);
      });
      Object.keys(cues).forEach(function (dir) {
        var cue = cues[dir];
        if (!cue) return;
        var n = found[dir].length;
        cue.hidden = n === 0;
        var text = n + " blocked off-screen";
        cue.querySelector("button").textContent = dir === "1" ? text + " →" : "← " + text;
      });
    }

    function schedule() {
      if (pending) return;
      pending = true;
      (window.requestAnimationFrame || setTimeout)(measure);
    }

    Object.keys(cues).forEach(function (dir) {
      var cue = cues[dir];
      if (!cue) return;
      cue.querySelector("button").addEventListener("click", function () {
        measure();
        var targets = found[dir];
        if (!targets.length) return;
        var rect = wrap.getBoundingClientRect();
        /* the nearest row in view first, else the first one */
        var li = targets.filter(function (el) {
          var r = el.getBoundingClientRect();
          return r.bottom > rect.top && r.top < rect.bottom;
        })[0] || targets[0];
        var r = li.getBoundingClientRect();
        var head = table.querySelector("thead th.rh");
        var from = head ? head.getBoundingClientRect().right : rect.left;
        var to = rect.left + wrap.clientLeft + wrap.clientWidth;
        wrap.scrollLeft += dir === "1" ? r.right - to + 24 : r.left - from - 24;
        if (r.top < rect.top || r.bottom > rect.bottom) {
          wrap.scrollTop += r.top - rect.top - rect.height / 2;
        }
        var a = li.querySelector("a");
        if (a) a.focus({ preventScroll: true });
        measure();
      });
    });
    wrap.addEventListener("scroll", schedule, { passive: true });
    window.addEventListener("resize", schedule);
    return measure;
  }

  function initIndex() {
    var table = document.getElementById("matrix");
    var form = document.getElementById("filters");
    var controls = toArray(form.querySelectorAll("[data-key]"));
    var entries = linkEntries(table);
    var groups = toArray(table.querySelectorAll("tbody.g"));
    var columns = toArray(table.querySelectorAll("[data-strategy]"));
    var output = document.getElementById("shown");
    var permalink = form.querySelector(".permalink");
    var views = toArray(document.querySelectorAll("nav.releases a[data-view]"));
    var wrap = table.closest(".matrix-wrap");
    var measure = offscreenCue(wrap, table, wrap.parentNode);
    /* A release view marked data-narrows has no page: it is this page (each recipe at its pin)
     * narrowed to the rows pinned at that release (tr data-release). */
    var narrowedTo = "";

    function readControls() {
      var state = {};
      controls.forEach(function (c) {
        if (c.value.trim()) state[c.dataset.key] = c.value.trim();
      });
      return state;
    }

    function writeControls(state) {
      controls.forEach(function (c) {
        var v = state[c.dataset.key] || "";
        if (c.tagName === "SELECT" && v && !Array.prototype.some.call(c.options, function (o) { return o.value === v; })) {
          c.add(new Option(v.split(",").join(", "), v)); /* a comma list from a shared link */
        }
        c.value = v;
      });
    }

    function apply(state) {
      var strategies = list(state.strategy), statuses = list(state.status);
      var features = list(state.feature), providers = list(state.provider);
      var terms = (state.q || "").toLowerCase().split(/\s+/).filter(Boolean);
      var narrowing = statuses.length || features.length;
      var release = state.release || "";
      columns.forEach(function (el) {
        el.hidden = strategies.length > 0 && strategies.indexOf(el.dataset.strategy) < 0;
      });
      entries.forEach(function (li) {
        var k = li.dataset.k, f = k.split(":")[0];
        li.hidden = (statuses.length > 0 && statuses.indexOf(li.dataset.s) < 0) ||
          (features.length > 0 && features.indexOf(k) < 0 && features.indexOf(f) < 0);
      });
      var shown = 0, recipes = 0;
      groups.forEach(function (g) {
        var any = false;
        each(g.querySelectorAll("tr.r"), function (tr) {
          var ok = (!providers.length || providers.indexOf(tr.dataset.provider) >= 0) &&
            (!release || tr.dataset.release === release) &&
            terms.every(function (t) { return tr.dataset.q.indexOf(t) >= 0; });
          var visible = 0;
          if (ok) {
            each(tr.querySelectorAll("td"), function (td) {
              if (td.hidden) return;
              visible += td.querySelectorAll("li.e:not([hidden])").length;
            });
          }
          tr.hidden = !ok || (narrowing && visible === 0);
          if (!tr.hidden) { any = true; shown += visible; recipes += 1; }
        });
        g.hidden = !any;
      });
      output.textContent = shown + " of " + entries.length + " feature modes in " + recipes +
        (recipes === 1 ? " recipe" : " recipes");
      var hash = formatHash(state);
      permalink.setAttribute("href", hash || "#");
      var filters = {};
      Object.keys(state).forEach(function (k) { if (k !== "release") filters[k] = state[k]; });
      var current = release || document.body.dataset.view;
      views.forEach(function (a) { /* the other releases keep the filters */
        var to = {};
        Object.keys(filters).forEach(function (k) { to[k] = filters[k]; });
        if (a.hasAttribute("data-narrows")) to.release = a.dataset.view;
        a.setAttribute("href", a.getAttribute("href").replace(/#.*$/, "") + formatHash(to));
        if (a.dataset.view === current) a.setAttribute("aria-current", "true");
        else a.removeAttribute("aria-current");
      });
      measure();
    }

    function fromHash() {
      var state = parseHash();
      var own = document.body.dataset.view;
      var view = state.release && views.filter(function (a) { return a.dataset.view === state.release; })[0];
      if (!view || state.release === own) {
        delete state.release;
      } else if (!(view.hasAttribute("data-narrows") && own === "pinned")) {
        if (!view.hasAttribute("data-narrows")) delete state.release; /* its own page */
        location.replace(view.getAttribute("href").replace(/#.*$/, "") + formatHash(state));
        return;
      }
      narrowedTo = state.release || "";
      writeControls(state);
      apply(state);
      if (state.target) {
        var el = document.getElementById(state.target);
        if (el && el.closest("[hidden]")) { /* a filter hides the cell: show everything */
          narrowedTo = "";
          writeControls({});
          apply({});
        }
        if (el) highlight([el]);
        measure();
      }
    }

    function onInput() {
      var state = readControls();
      if (narrowedTo) state.release = narrowedTo;
      apply(state);
      setHash(formatHash(state));
    }

    controls.forEach(function (c) {
      c.addEventListener(c.tagName === "SELECT" ? "change" : "input", onInput);
    });
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    form.addEventListener("reset", function () { setTimeout(onInput, 0); });
    window.addEventListener("hashchange", fromHash);
    fromHash();
  }

  /* ------------------------------------------------------------------ recipe page */

  /* Give every cell its data-cell id and a permalink ("#" on hover; a section may hold several
   * releases, and showing one points its permalinks there), and the first of each at the
   * default release that id (compat.emit.site.cell_id, what index entries link to). A row's
   * feature mode is its header's text; a variant's header row (tr.v) names no feature mode. */
  function linkCells(recipeSlug, fallback) {
    each(document.querySelectorAll("table.recipe"), function (table) {
      var heads = toArray(table.querySelectorAll("thead th:not(.rh)"));
      var releases = table.closest("section.rel").dataset.releases.split(" ");
      var pinned = releases.indexOf(fallback) >= 0;
      each(table.querySelectorAll("tbody tr:not(.v)"), function (tr) {
        var label = tr.querySelector("th").textContent;
        var fm = fmSlug(label);
        each(tr.querySelectorAll("td"), function (td, i) {
          if (td.classList.contains("na") || !heads[i]) return;
          var st = heads[i].dataset.st || heads[i].textContent.trim(); /* written when they differ */
          var id = "cell-" + recipeSlug + "-" + st + "-" + fm;
          td.dataset.cell = id;
          if (pinned && !document.getElementById(id)) td.id = id;
          var a = document.createElement("a");
          a.className = "pl";
          a.href = pinned ? "#" + id : "#release=" + releases[0] + "&cell=" + id;
          a.setAttribute("aria-label", "Permalink to " + label + " on " + heads[i].textContent);
          a.textContent = "#";
          td.insertBefore(a, td.firstChild);
        });
      });
    });
  }

  /* A blocked cell's hint (cause, fix, first working release) is its notes'; a section writes
   * it at the first cell citing them (span.cz data-n): show it at the others too. */
  function showHints(section) {
    var first = {};
    each(section.querySelectorAll(".cz[data-n]"), function (cz) {
      cz.dataset.n.split(" ").forEach(function (n) { if (!first[n]) first[n] = cz; });
    });
    each(section.querySelectorAll(".p.s-blocked"), function (part) {
      var said = toArray(part.querySelectorAll(".cz")).map(function (cz) { return cz.textContent; });
      each(part.querySelectorAll("a[href^='#note-']"), function (a) {
        var cz = first[a.getAttribute("href").slice(6)];
        if (!cz || said.indexOf(cz.textContent) >= 0) return;
        said.push(cz.textContent);
        part.appendChild(cz.cloneNode(true));
      });
    });
  }

  /* The cells of a section citing each note, by note id: "base, tool_calling on multi_node_tp,
   * multi_node_tep; text_only on single_node_tp" (feature modes with the same strategies
   * together). */
  function citedCells(section) {
    var byNote = {};
    each(section.querySelectorAll("table.recipe"), function (table) {
      var heads = toArray(table.querySelectorAll("thead th:not(.rh)"));
      each(table.querySelectorAll("tbody tr:not(.v)"), function (tr) {
        var label = tr.querySelector("th").textContent;
        each(tr.querySelectorAll("td"), function (td, i) {
          each(td.querySelectorAll("a[href^='#note-']"), function (a) {
            var id = a.getAttribute("href").slice(1);
            var labels = byNote[id] = byNote[id] || {};
            var strategies = labels[label] = labels[label] || [];
            var strategy = heads[i].textContent.trim();
            if (strategies.indexOf(strategy) < 0) strategies.push(strategy);
          });
        });
      });
    });
    var text = {};
    Object.keys(byNote).forEach(function (id) {
      var groups = [], at = {};
      Object.keys(byNote[id]).forEach(function (label) {
        var where = byNote[id][label].join(", ");
        if (!(where in at)) { at[where] = groups.length; groups.push([[], where]); }
        groups[at[where]][0].push(label);
      });
      text[id] = groups.map(function (g) { return g[0].join(", ") + " on " + g[1]; }).join("; ");
    });
    return text;
  }

  /* Show each text a note cites ([t1], [c1], [k1]: a link to the one copy under "Said once";
   * a note's only links within the page) in place of the citation. */
  function showCited() {
    each(document.querySelectorAll("#notes a[href^='#']"), function (a) {
      var said = document.getElementById(a.getAttribute("href").slice(1));
      if (!said) return;
      var copy = document.createDocumentFragment();
      each(said.childNodes, function (node) { copy.appendChild(node.cloneNode(true)); });
      a.parentNode.replaceChild(copy, a);
    });
  }

  function initRecipe() {
    var sections = toArray(document.querySelectorAll("section.rel"));
    var links = toArray(document.querySelectorAll("nav.releases a[href^='#release=']"));
    links.forEach(function (a) { a.dataset.release = a.getAttribute("href").slice(9); });
    var fallback = document.body.dataset.default;
    var notes = toArray(document.querySelectorAll("#notes li.note"));
    var notesHead = document.getElementById("notes-h");
    showCited();
    sections.forEach(showHints);
    linkCells(document.body.dataset.slug, fallback);

    function holds(section, release) {
      return section.dataset.releases.split(" ").indexOf(release) >= 0;
    }

    /* the release a section stands for when a link names none: the default, else its first */
    function releaseOf(section) {
      return holds(section, fallback) ? fallback : section.dataset.releases.split(" ")[0];
    }

    function sectionOf(release) {
      return sections.filter(function (s) { return holds(s, release); })[0];
    }

    function cites(section, noteId) {
      return !!section.querySelector("a[href='#" + noteId + "']");
    }

    /* One release's table, and the notes its cells cite (the notes are the page's). */
    function show(release) {
      sections.forEach(function (s) { s.hidden = !holds(s, release); });
      links.forEach(function (a) {
        if (a.dataset.release === release) a.setAttribute("aria-current", "true");
        else a.removeAttribute("aria-current");
      });
      var section = sectionOf(release);
      var cited = section ? citedCells(section) : {};
      if (section) {
        each(section.querySelectorAll("td[data-cell] > a.pl"), function (a) {
          var id = a.parentNode.dataset.cell;
          a.href = release === fallback ? "#" + id : "#release=" + release + "&cell=" + id;
        });
      }
      notes.forEach(function (li) {
        li.hidden = !cited[li.id];
        var cells = li.querySelector(".cells");
        if (!cells) {
          cells = document.createElement("p");
          cells.className = "cells";
          cells.appendChild(document.createElement("strong"));
          li.querySelector(".nh").insertAdjacentElement("afterend", cells);
        }
        cells.firstChild.textContent = cited[li.id] || "";
      });
      /* a text said once for several releases names the release as a variable; evidence links
       * point at the vLLM source of the release shown */
      each(document.querySelectorAll("#notes var.rel"), function (v) { v.textContent = release; });
      var link = links.filter(function (a) { return a.dataset.release === release; })[0];
      var ref = link && link.hasAttribute("data-ref") ? link.dataset.ref : "v" + release;
      if (ref) {
        each(document.querySelectorAll("#notes a[href*='/vllm-project/vllm/blob/']"), function (a) {
          a.href = a.href.replace(/\/blob\/[^/]+\//, "/blob/" + ref + "/");
        });
      }
      if (notesHead) notesHead.textContent = "Notes for vLLM " + release;
    }

    function fromHash() {
      var state = parseHash();
      var release = fallback;
      var byId = state.target && document.getElementById(state.target);
      if (state.release && sectionOf(state.release)) {
        release = state.release;
      } else if (byId && !state.cell && byId.closest("section.rel")) {
        release = releaseOf(byId.closest("section.rel")); /* a pinned cell */
      } else if (byId && byId.classList.contains("note") && !cites(sectionOf(release), byId.id)) {
        var citing = sections.filter(function (s) { return cites(s, byId.id); })[0];
        if (citing) release = releaseOf(citing); /* a note the default release does not cite */
      }
      function cellsIn(rel) {
        var section = sectionOf(rel);
        return section ? toArray(section.querySelectorAll("[data-cell]")).filter(function (td) {
          return td.dataset.cell === state.target;
        }) : [];
      }
      var cells = state.target ? cellsIn(release) : [];
      if (state.target && !cells.length && !state.release) { /* a cell only some releases have */
        sections.some(function (s) {
          cells = cellsIn(releaseOf(s));
          if (cells.length) release = releaseOf(s);
          return cells.length > 0;
        });
      }
      show(release);
      if (!state.target) return;
      var marks = cells.slice();
      cells.forEach(function (td) {
        each(td.querySelectorAll("a[href^='#note-']"), function (ref) {
          var note = document.getElementById(ref.getAttribute("href").slice(1));
          if (note && marks.indexOf(note) < 0) marks.push(note);
        });
      });
      if (!cells.length && byId) marks = [byId];
      highlight(marks);
    }

    window.addEventListener("hashchange", fromHash);
    fromHash();
  }

  function init() {
    if (document.getElementById("matrix")) initIndex();
    if (document.querySelector("section.rel")) initRecipe();
    document.documentElement.setAttribute("data-ready", "1");
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
