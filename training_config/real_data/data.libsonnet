// Real data for the shipped configs, read from ../shared/data (never copied into the project; run
// from the repository root). `on(config, dataset)` gives `config` with the dataset's files, readers
// and GloVe 6B 50d in every embedder and in the vocabulary. Everything else, the length-bucketed
// batches (sorted by `tokens`, which every reader here gives) included, is the config's own.
//
//   conll2000_chunking  CoNLL-2000 chunk column; dev = every 9th training sentence (992), the model
//                       trains on the other 7,944 (`conll_columns`' `?held_out=` paths)
//   conll2000_pos       CoNLL-2000 POS column (Brill-tagger tags), same split
//   ewt_upos            UD English-EWT r2.16 UPOS (`conllu_ner` with tag_source "upos")
local shared = "../shared/data/";
local glove = shared + "embeddings_glove6b50d_filtered/glove.6B.50d.filtered.txt.gz";
local conll2000 = shared + "conll2000/";
local ewt = shared + "ud_english_ewt/r2.16/en_ewt-ud-";

local conll2000_paths = {
  train_data_path: conll2000 + "train.txt?without_held_out=9",
  validation_data_path: conll2000 + "train.txt?held_out=9",
  test_data_path: conll2000 + "test.txt",
};

// The eleven CoNLL-2000 chunk types, all declared: training never has a multi-word LST chunk, which
// test.txt has, and UCP occurs only in the held-out dev sentences.
local chunk_types = ["ADJP", "ADVP", "CONJP", "INTJ", "LST", "NP", "PP", "PRT", "SBAR", "UCP", "VP"];
local prefixes = { BIOUL: ["B", "I", "L", "U"], BIO: ["B", "I"], IOB1: ["B", "I"] };
local chunk_labels(scheme) = ["O"] + [prefix + "-" + chunk for chunk in chunk_types for prefix in prefixes[scheme]];

local datasets = {
  conll2000_chunking: function(config) conll2000_paths + {
    vocabulary+: { tokens_to_add: { labels: chunk_labels(config.dataset_reader.tag_scheme) } },
  },
  conll2000_pos: function(config) conll2000_paths,
  ewt_upos: function(config)
    local reader = { type: "conllu_ner", tag_source: "upos", token_indexers: config.dataset_reader.token_indexers };
    {
      dataset_reader: reader,
      [if std.objectHas(config, "validation_dataset_reader") then "validation_dataset_reader"]: reader,
      train_data_path: ewt + "train.conllu",
      validation_data_path: ewt + "dev.conllu",
      test_data_path: ewt + "test.conllu",
    },
};

// GloVe in the word embedder (or in char_gated's word_embedding) and in the vocabulary.
local with_glove(config) =
  local tokens = config.model.text_field_embedder.token_embedders.tokens;
  config + {
    vocabulary+: { pretrained_files: { tokens: glove } },
    model+: { text_field_embedder+: { token_embedders+: { tokens+:
      if std.objectHas(tokens, "word_embedding") then { word_embedding+: { pretrained_file: glove } }
      else { pretrained_file: glove },
    } } },
  };

{
  glove: glove,
  on(config, dataset):: with_glove(config) + datasets[dataset](config),
}
