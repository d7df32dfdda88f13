// The data a shipped config trains on. Every config trains on the fixtures as it is; a real data set
// is a small config beside it, in a folder named after the data set, that applies `on` to it:
//
//   allennlp train training_config/conll2003/deptree_ner.jsonnet -s runs/x --include-package nerzoo
//
// where training_config/conll2003/deptree_ner.jsonnet is
//
//   (import "../data.libsonnet").on((import "../deptree_ner.jsonnet").fixture_config, "conll2003")
//
// The folders hold the pairs of docs/RESULTS.md; another pair is the same one line.
//
// Every config ends with `data.on(config)`, and declares (hidden) what a real data set needs:
//
//   on_real_data:: {
//     task: "NER",    // what its reader labels: NER, POS, chunking or thread discourse
//     glove: ["vocabulary.pretrained_files.tokens", "model.text_field_embedder.token_embedders.tokens.pretrained_file"],
//   },
//
// `glove` lists, as dot-separated paths, exactly the fields of the config that name a pretrained
// file (every `pretrained_file`, every entry of a `pretrained_files`): any other, or a path that
// names none, is an error on every data set, so no embedder keeps its fixture vectors on real data.
// `fixtures` (the default) leaves the config as it is. A real data set is read from ../shared/data
// (run from the repository root; the data is never copied into the project, each folder has a
// PROVENANCE.md): it sets the three data paths, the reader the config's model needs on it (or
// keeps the config's own), and GloVe 6B 50d in every field of `glove` (the word embedders and the
// vocabulary, so that test words unseen in training keep their GloVe vectors). Everything else,
// the length-bucketed batches included, is the config's.
//
//   conll2003           CoNLL-2003 English NER: eng.train, eng.testa (dev), eng.testb (test), each
//                       config's own reader: spaCy trees (deptree_ner), whole documents (me_crf),
//                       entity spans (fofe_ner), sentences (bilstm_crf)
//   uner_ewt            UNER English-EWT NER with the gold UD r2.9 trees (`conllu_ner` joins the
//                       .iob2 files with the treebank on sent_id); sentence-level NER configs only.
//                       Its released train file is not here: it trains on the pre-release one, whose
//                       OTH and spurious B-O tags are read as O (see uner_english_ewt/PROVENANCE.md)
//   wnut17              WNUT-17 emerging entities (user-generated text, 6 types): wnut17train.conll,
//                       emerging.dev.conll, emerging.test.annotated (the single-label test file), TAB
//                       columns `token tag`, IOB2; the config's own reader; sentence-level NER configs only
//   conll2000_chunking  CoNLL-2000 chunk column; dev = every 9th training sentence (992), the model
//                       trains on the other 7,944 (`conll_columns`' `?held_out=` paths); all eleven
//                       chunk types declared in the label vocabulary
//   conll2000_pos       CoNLL-2000 POS column (Brill-tagger tags), the same split
//   ewt_upos            UD English-EWT r2.16 UPOS (`conllu_ner` with tag_source "upos")
//
// A data set accepts the configs of its task (and of the readers it can feed); any other pair is a
// Jsonnet error naming the model and the data sets it accepts. A config built on another one starts
// from the other's `fixture_config` (hidden, `on_real_data` included) and applies `on` itself, so
// the data fits the final config: one that changes what it labels or its pretrained files says so
// (`on_real_data+:: { task: "POS" }`).
local shared = "../shared/data/";
local glove = shared + "embeddings_glove6b50d_filtered/glove.6B.50d.filtered.txt.gz";

local paths(prefix, train, validation, test) = {
  train_data_path: prefix + train,
  validation_data_path: prefix + validation,
  test_data_path: prefix + test,
};
local conll2000_paths = paths(shared + "conll2000/", "train.txt?without_held_out=9", "train.txt?held_out=9", "test.txt");

// The eleven CoNLL-2000 chunk types, all declared: training never has a multi-word LST chunk, which
// test.txt has, and UCP occurs only in the held-out dev sentences.
local chunk_types = ["ADJP", "ADVP", "CONJP", "INTJ", "LST", "NP", "PP", "PRT", "SBAR", "UCP", "VP"];
local prefixes = { BIOUL: ["B", "I", "L", "U"], BIO: ["B", "I"], IOB1: ["B", "I"] };
local chunk_labels(scheme) = ["O"] + [prefix + "-" + chunk for chunk in chunk_types for prefix in prefixes[scheme]];

// What the config labels, as it declares.
local task(config) = config.on_real_data.task;
local reads_columns(config) = config.dataset_reader.type == "conll_columns";
local reads_sentences(config) =
  std.member(["conll_columns", "spacy_parsed_conll"], config.dataset_reader.type)
  && !std.get(config.dataset_reader, "document_level", false);

// `change(reader)` for every reader of the config.
local every_reader(config, change) = {
  dataset_reader: change(config.dataset_reader),
  [if std.objectHas(config, "validation_dataset_reader") then "validation_dataset_reader"]:
    change(config.validation_dataset_reader),
};
// `reader` with the config's token indexers, for every reader of the config.
local readers(config, reader) =
  every_reader(config, function(_) reader { token_indexers: config.dataset_reader.token_indexers });
// The config's own readers, reading other columns.
local columns(config, settings) = every_reader(config, function(own) own + settings);

// name -> what configs it accepts, and what it sets on one.
local datasets = {
  fixtures: { accepts(config): true, set(config): {} },
  conll2003: {
    accepts(config): task(config) == "NER",
    set(config): paths(shared + "conll2003/eng.", "train", "testa", "testb"),
  },
  uner_ewt: {
    accepts(config): task(config) == "NER" && reads_sentences(config),
    set(config):
      paths(shared + "uner_english_ewt/", "prerelease/en_ewt-ud-train.prerelease-0c7ce0d.iob2", "en_ewt-ud-dev.iob2", "en_ewt-ud-test.iob2")
      + readers(config, {
        type: "conllu_ner",
        treebank: shared + "ud_english_ewt/r2.9/*.conllu",
        drop_entity_types: ["OTH", "O"],
        file_tag_scheme: "BIO",
        tag_scheme: config.dataset_reader.tag_scheme,
      }),
  },
  wnut17: {
    accepts(config): task(config) == "NER" && reads_sentences(config),
    set(config):
      paths(shared + "wnut17/", "wnut17train.conll", "emerging.dev.conll", "emerging.test.annotated")
      + columns(config, { tag_column: 1, file_tag_scheme: "BIO", delimiter: "\t" }),
  },
  conll2000_chunking: {
    accepts(config): task(config) == "chunking" && reads_columns(config),
    set(config): conll2000_paths + {
      vocabulary+: { tokens_to_add: { labels: chunk_labels(config.dataset_reader.tag_scheme) } },
    },
  },
  conll2000_pos: {
    accepts(config): task(config) == "POS" && reads_columns(config),
    set(config): conll2000_paths,
  },
  ewt_upos: {
    accepts(config): task(config) == "POS" && reads_columns(config),
    set(config):
      paths(shared + "ud_english_ewt/r2.16/en_ewt-ud-", "train.conllu", "dev.conllu", "test.conllu")
      + readers(config, { type: "conllu_ner", tag_source: "upos" }),
  },
};

// The path, dot-separated, of every field of `value` that names a pretrained file: each
// `pretrained_file`, and each entry of a `pretrained_files` (the vocabulary's).
local pretrained_paths(value, prefix="") =
  if std.isObject(value) then std.flattenArrays([
    if key == "pretrained_file" then [prefix + key]
    else if key == "pretrained_files" && std.isObject(value[key]) then [prefix + key + "." + namespace for namespace in std.objectFields(value[key])]
    else pretrained_paths(value[key], prefix + key + ".")
    for key in std.objectFields(value)
  ])
  else if std.isArray(value) then std.flattenArrays([pretrained_paths(value[index], prefix + index + ".") for index in std.range(0, std.length(value) - 1)])
  else [];
// `value` with `new` at the path `keys`.
local put(value, keys, new) =
  if std.length(keys) == 1 then value { [keys[0]]: new }
  else value { [keys[0]]: put(value[keys[0]], keys[1:], new) };
// GloVe in every field the config declares in `on_real_data.glove`.
local with_glove(config) = std.foldl(function(value, path) put(value, std.split(path, "."), glove), config.on_real_data.glove, config);
// Why `config` does not declare what the data sets need, or null: its task, and exactly the
// fields that name pretrained files (any other would keep its fixture vectors on real data).
local undeclared(config) =
  local about = "model " + config.model.type + ": ";
  if !std.objectHasAll(config, "on_real_data") then
    about + "the config declares no `on_real_data:: { task: ..., glove: [...] }` (training_config/data.libsonnet)"
  else
    local found = std.set(pretrained_paths(config));
    local declared = std.set(config.on_real_data.glove);
    local missing = std.setDiff(found, declared);
    local extra = std.setDiff(declared, found);
    if std.length(missing) > 0 then
      about + "pretrained files not in its on_real_data.glove, which would keep their fixture vectors: " + std.join(", ", missing)
    else if std.length(extra) > 0 then
      about + "on_real_data.glove names fields that hold no pretrained file: " + std.join(", ", extra)
    else null;

// The names, fixtures first.
local names = ["fixtures"] + [name for name in std.objectFields(datasets) if name != "fixtures"];
local accepted(config) = [name for name in names if datasets[name].accepts(config)];
local refusal(config, name) =
  local about = "model " + config.model.type + " (its " + config.dataset_reader.type + " reader labels " + task(config) + ")";
  if !std.objectHas(datasets, name) then
    "data set " + name + " is none of training_config/data.libsonnet; they are: " + std.join(", ", names)
  else if !datasets[name].accepts(config) then
    "data set " + name + " does not apply to " + about + "; it accepts " + std.join(", ", accepted(config))
  else null;

{
  glove: glove,
  datasets: names,
  // The names `config` accepts.
  accepted(config):: accepted(config),
  // `config` on the data set `name`. On a refused name every field is the error; `fixture_config`
  // stays readable, for the configs built on this one.
  on(config, name="fixtures")::
    local declaration = undeclared(config);
    assert declaration == null : declaration;
    local problem = refusal(config, name);
    local applied =
      if problem != null then { [field]: error problem for field in std.objectFields(config) }
      else if name == "fixtures" then config
      else with_glove(config) + datasets[name].set(config);
    applied + { fixture_config:: config },
}
