// The page of `allennlp serve`: asks the JSON API and draws its answer. Every piece of text from
// the input or a model goes into the page through textContent, never as markup.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const PALETTE = ["#ffd166", "#8ecae6", "#b5e48c", "#f4a4c0", "#cdb4db", "#ffb085", "#a0e7e5", "#e9c46a", "#d4a373", "#bde0fe"];
const MAX_HEATMAP_TOKENS = 80;
const state = { models: {}, limits: {} };

function $(id) { return document.getElementById(id); }

function element(tag, attributes = {}, text = null) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== null) node.textContent = text;
  return node;
}

function svgElement(tag, attributes = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== null) node.textContent = text;
  return node;
}

function colour(model, label) {
  const index = state.models[model].labels.indexOf(label);
  return PALETTE[(index < 0 ? 0 : index) % PALETTE.length];
}

function showError(message) {
  const box = $("error");
  box.textContent = message || "";
  box.hidden = !message;
}

async function api(path, body) {
  const options = body === undefined ? {} : { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  let response;
  try {
    response = await fetch(path, options);
  } catch (error) {
    throw new Error(`the server cannot be reached (${error.message})`);
  }
  let answer;
  try {
    answer = await response.json();
  } catch (error) {
    throw new Error(`the server answered ${response.status} without JSON`);
  }
  if (!response.ok) throw new Error(answer.error || `the server answered ${response.status}`);
  return answer;
}

async function loadModels() {
  const answer = await api("/api/models");
  state.limits = answer.limits;
  for (const select of [$("model-a"), $("model-b")]) select.replaceChildren();
  for (const model of answer.models) {
    state.models[model.name] = model;
    for (const select of [$("model-a"), $("model-b")]) select.append(element("option", { value: model.name }, model.name));
  }
  if (answer.models.length > 1) $("model-b").selectedIndex = 1;
  $("limit").textContent = `up to ${state.limits.max_chars} characters`;
  $("served").textContent = `${answer.models.length} model${answer.models.length === 1 ? "" : "s"}: ${answer.models.map((m) => m.name).join(", ")}`;
  chooseMode();
}

function chooseMode() {
  const model = state.models[$("model-a").value];
  if (model) $("mode").value = model.features.documents ? "document" : "sentence";
}

function selectedModels() {
  const names = [$("model-a").value];
  if ($("compare").checked && $("model-b").value) names.push($("model-b").value);
  return names;
}

async function tag(event) {
  if (event) event.preventDefault();
  const text = $("text").value;
  const names = selectedModels();
  showError("");
  $("tag").disabled = true;
  const results = $("results");
  results.setAttribute("aria-busy", "true");
  try {
    const answers = await Promise.all(names.map(async (name) => {
      const body = { [$("mode").value]: text };
      if ($("attention").checked && state.models[name].features.attention.length) body.attention = true;
      try {
        return { name, result: await api(`/api/models/${encodeURIComponent(name)}/predict`, body) };
      } catch (error) {
        return { name, error: error.message };
      }
    }));
    results.replaceChildren();
    const errors = answers.filter((answer) => answer.error);
    if (errors.length === answers.length) {
      showError(errors.map((answer) => `${answer.name}: ${answer.error}`).join("\n"));
      return;
    }
    for (const answer of answers) results.append(renderColumn(answer, text));
    applyThreshold();
  } finally {
    $("tag").disabled = false;
    results.setAttribute("aria-busy", "false");
    results.dataset.answered = String(Number(results.dataset.answered || 0) + 1);  // answers shown so far
  }
}

function renderColumn(answer, text) {
  const model = state.models[answer.name];
  const column = element("section", { class: "column", "data-model": answer.name });
  column.append(element("h2", {}, answer.name));
  const temperatures = Object.values(model.temperatures);
  const calibrated = temperatures.some((value) => value !== 1) ? `calibrated (T = ${temperatures.map((v) => v.toFixed(2)).join(", ")})` : "not calibrated";
  column.append(element("div", { class: "meta" }, `${model.model_type} · ${model.tag_scheme || "spans"} · ${calibrated}`));
  if (answer.error) {
    column.append(element("div", { class: "column-error", role: "alert" }, answer.error));
    return column;
  }
  const result = answer.result;
  const legend = element("div", { class: "legend" });
  for (const label of model.labels) {
    const key = element("span", {}, label);
    key.style.background = colour(answer.name, label);
    legend.append(key);
  }
  column.append(legend, renderDocument(answer.name, result, text), renderTokens(result));
  if (result.parse) column.append(renderTree(result));
  for (const kind of ["relative_attention", "global_attention"]) {
    if (result[kind]) column.append(renderHeatmap(kind.replace("_", " "), kind, result.tokens, result[kind]));
  }
  if (result.memory_attention) {
    result.memory_attention.forEach((hop, index) => {
      const rows = hop.map((pairs) => {
        const row = new Array(result.tokens.length + 1).fill(0);
        for (const [position, weight] of pairs) row[position < 0 ? result.tokens.length : position] = weight;
        return row;
      });
      column.append(renderHeatmap(`memory hop ${index + 1}`, `memory_attention-hop-${index + 1}`, result.tokens, rows, [...result.tokens, "∅"]));
    });
  }
  return column;
}

function sentenceRanges(result) {
  const spans = result.sentences || [[0, result.tokens.length]];
  return spans.map(([start, end]) => [result.token_offsets[start][0], result.token_offsets[end - 1][1]]);
}

function renderDocument(name, result, text) {
  const documentNode = element("div", { class: "document" });
  if (!result.tokens.length) return documentNode;
  const outer = result.spans.filter((span) => (span.level || 1) === 1);
  const nested = result.spans.filter((span) => (span.level || 1) > 1);
  for (const [sentenceStart, sentenceEnd] of sentenceRanges(result)) {
    const sentence = element("div", { class: "sentence", "data-char-start": sentenceStart, "data-char-end": sentenceEnd });
    let position = sentenceStart;
    for (const span of outer.filter((s) => s.char_start >= sentenceStart && s.char_end <= sentenceEnd)) {
      if (span.char_start < position) continue;
      sentence.append(document.createTextNode(text.slice(position, span.char_start)));
      sentence.append(renderSpan(name, span, text));
      position = span.char_end;
    }
    sentence.append(document.createTextNode(text.slice(position, sentenceEnd)));
    documentNode.append(sentence);
  }
  if (nested.length) {
    const list = element("div", { class: "nested" }, "nested: ");
    for (const span of nested) list.append(renderSpan(name, span, text), document.createTextNode(" "));
    documentNode.append(list);
  }
  return documentNode;
}

function renderSpan(name, span, text) {
  const confidence = span.confidence !== undefined ? span.confidence : span.score;
  const mark = element("mark", {
    class: "entity",
    "data-label": span.label,
    "data-char-start": span.char_start,
    "data-char-end": span.char_end,
    "data-confidence": confidence,
    title: `${span.label}, confidence ${confidence.toFixed(3)}, characters ${span.char_start}-${span.char_end}`,
  });
  mark.style.background = colour(name, span.label);
  mark.append(element("span", { class: "entity-text" }, text.slice(span.char_start, span.char_end)));
  mark.append(element("span", { class: "entity-label" }, `${span.label} ${confidence.toFixed(2)}`));
  return mark;
}

function renderTokens(result) {
  const details = element("details", { class: "tokens" });
  details.append(element("summary", {}, `Tokens (${result.tokens.length}): tags and confidences`));
  const table = element("table");
  const header = ["#", "token", "chars", "tag", "confidence"];
  if (result.parse) header.push("POS", "relation", "head");
  const head = element("tr");
  for (const name of header) head.append(element("th", {}, name));
  table.append(head);
  result.tokens.forEach((token, index) => {
    const row = element("tr", { "data-token-index": index });
    const cells = [index + 1, token, result.token_offsets[index].join("-"), result.tags[index], result.tag_confidences[index].toFixed(3)];
    if (result.parse) cells.push(result.parse.pos_tags[index], result.parse.dependency_labels[index], result.parse.head_indices[index]);
    for (const value of cells) row.append(element("td", {}, String(value)));
    table.append(row);
  });
  const scroll = element("div", { class: "scroll" });
  scroll.append(table);
  details.append(scroll);
  return details;
}

function renderTree(result) {
  const wrapper = element("div", { class: "tree scroll" });
  const xs = [];
  let x = 10;
  for (const token of result.tokens) {
    const width = Math.max(token.length, result.parse.pos_tags[xs.length].length) * 8 + 18;
    xs.push(x + width / 2);
    x += width;
  }
  const heads = result.parse.head_indices;
  const longest = Math.max(1, ...heads.map((head, index) => (head > 0 ? Math.abs(head - 1 - index) : 0)));
  const arcHeight = (distance) => 18 + (distance / longest) * 110;
  const baseline = arcHeight(longest) + 30;
  const svg = svgElement("svg", { width: x + 10, height: baseline + 36, role: "img", "aria-label": "dependency tree" });
  heads.forEach((head, index) => {
    const to = xs[index];
    const label = result.parse.dependency_labels[index];
    const group = svgElement("g", { class: "arc", "data-head": head, "data-dependent": index + 1 });
    if (head === 0) {
      group.append(svgElement("path", { d: `M ${to} ${baseline - 4} L ${to} 8` }));
      group.append(svgElement("text", { class: "arc-label", x: to + 3, y: 14 }, label));
    } else {
      const from = xs[head - 1];
      const top = baseline - arcHeight(Math.abs(head - 1 - index));
      group.append(svgElement("path", { d: `M ${from} ${baseline - 4} C ${from} ${top}, ${to} ${top}, ${to} ${baseline - 4}` }));
      group.append(svgElement("path", { d: `M ${to - 3} ${baseline - 10} L ${to} ${baseline - 4} L ${to + 3} ${baseline - 10}` }));
      group.append(svgElement("text", { class: "arc-label", x: (from + to) / 2, y: top + 18 * 0.75, "text-anchor": "middle" }, label));
    }
    svg.append(group);
  });
  result.tokens.forEach((token, index) => {
    svg.append(svgElement("text", { class: "tree-token", x: xs[index], y: baseline + 12, "text-anchor": "middle" }, token));
    svg.append(svgElement("text", { class: "tree-pos", x: xs[index], y: baseline + 27, "text-anchor": "middle" }, result.parse.pos_tags[index]));
  });
  const details = element("details", { class: "tree-details", open: "" });
  details.append(element("summary", {}, "Dependency tree"));
  wrapper.append(svg);
  details.append(wrapper);
  return details;
}

function renderHeatmap(title, kind, tokens, weights, columns = tokens) {
  const rows = Array.isArray(weights[0]) ? weights : [weights];
  const rowNames = rows.length === 1 && !Array.isArray(weights[0]) ? ["weight"] : tokens;
  const shownRows = Math.min(rows.length, MAX_HEATMAP_TOKENS);
  const shownColumns = Math.min(columns.length, MAX_HEATMAP_TOKENS + 1);
  const cell = 14;
  const labelWidth = Math.min(120, 8 + 7 * Math.max(...rowNames.slice(0, shownRows).map((name) => name.length)));
  const labelHeight = Math.min(120, 8 + 7 * Math.max(...columns.slice(0, shownColumns).map((name) => name.length)));
  const svg = svgElement("svg", { class: "heatmap-grid", "data-kind": kind, width: labelWidth + shownColumns * cell + 4, height: labelHeight + shownRows * cell + 4, role: "img", "aria-label": title });
  for (let column = 0; column < shownColumns; column++) {
    const x = labelWidth + column * cell + cell / 2;
    svg.append(svgElement("text", { x, y: labelHeight - 4, transform: `rotate(-60 ${x} ${labelHeight - 4})` }, columns[column]));
  }
  for (let row = 0; row < shownRows; row++) {
    const y = labelHeight + row * cell;
    svg.append(svgElement("text", { x: labelWidth - 4, y: y + cell - 3, "text-anchor": "end" }, rowNames[row]));
    const largest = Math.max(...rows[row]) || 1;
    for (let column = 0; column < shownColumns; column++) {
      const weight = rows[row][column] || 0;
      const rect = svgElement("rect", { class: "cell", x: labelWidth + column * cell, y, width: cell - 1, height: cell - 1, fill: "#1d3557", "fill-opacity": (weight / largest).toFixed(3), "data-weight": weight });
      rect.append(svgElement("title", {}, `${rowNames[row]} → ${columns[column]}: ${weight}`));
      svg.append(rect);
    }
  }
  const details = element("details", { class: "heatmap", open: "" });
  const clipped = rows.length > shownRows || columns.length > shownColumns ? ` (first ${MAX_HEATMAP_TOKENS} tokens)` : "";
  details.append(element("summary", {}, `${title[0].toUpperCase()}${title.slice(1)}${clipped}`));
  const scroll = element("div", { class: "scroll" });
  scroll.append(svg);
  details.append(scroll);
  return details;
}

function applyThreshold() {
  const threshold = Number($("threshold").value);
  $("threshold-value").textContent = threshold.toFixed(2);
  for (const mark of document.querySelectorAll("mark.entity")) {
    mark.classList.toggle("below-threshold", Number(mark.dataset.confidence) < threshold);
  }
}

window.addEventListener("DOMContentLoaded", () => {
  $("form").addEventListener("submit", tag);
  $("text").addEventListener("keydown", (event) => { if (event.key === "Enter" && event.ctrlKey) tag(event); });
  $("threshold").addEventListener("input", applyThreshold);
  $("compare").addEventListener("change", () => { $("model-b").disabled = !$("compare").checked; });
  $("model-a").addEventListener("change", chooseMode);
  loadModels().catch((error) => showError(`cannot load the models: ${error.message}`));
});
