// ME-CRF for NER over whole documents, Liu, Baldwin & Cohn (2017), https://aclanthology.org/I17-1056
// (§5.2): fixed GloVe 50d + six word-shape features, a BiGRU memory with one hop over every earlier
// word of the document, a CRF over each sentence's BIO tags; Adam, batches of 32 documents.
// Variants (K hops, bounded memory, MEMNET, one CRF per document): docs/me_crf.md.
// Data: the fixtures (default) or conll2003 (training_config/data.libsonnet).
local data = import "data.libsonnet";
local glove = "fixtures/embeddings/tiny_glove.txt";
local word_dim = 50;
local num_shape_features = 6;
local hidden_dim = 50;

local config = {
  // allennlp's train loop, the test set read whole after distributed training (nerzoo/training/whole_test_set.py).
  type: "whole_test_set",
  // What training_config/data.libsonnet needs on a real data set (hidden).
  on_real_data:: {
    task: "NER",
    glove: ["vocabulary.pretrained_files.tokens", "model.text_field_embedder.token_embedders.tokens.pretrained_file"],
  },
  dataset_reader: {
    type: "conll_columns",
    tag_column: 3,
    file_tag_scheme: "IOB1",
    tag_scheme: "BIO",
    document_level: true,
    token_indexers: {
      tokens: { type: "single_id", lowercase_tokens: true },
      shape: { type: "lexical_features" },
    },
  },
  train_data_path: "fixtures/conll2003/train.txt",
  validation_data_path: "fixtures/conll2003/dev.txt",
  test_data_path: "fixtures/conll2003/test.txt",
  evaluate_on_test: true,
  // Every GloVe word joins the vocabulary: the embeddings are fixed, so test words unseen in
  // training keep their pretrained vectors.
  vocabulary: {
    type: "from_instances",
    pretrained_files: { tokens: glove },
    min_pretrained_embeddings: { tokens: 500000 },
  },
  model: {
    type: "me_crf",
    text_field_embedder: {
      token_embedders: {
        tokens: { type: "embedding", embedding_dim: word_dim, pretrained_file: glove, trainable: false },
        shape: { type: "lexical_features" },
      },
    },
    memory: { hidden_dim: hidden_dim, memory_dim: hidden_dim, num_hops: 1, causal: true, dropout: 0.2 },
    head: { tag_scheme: "BIO", constrain_crf_decoding: true, crf_per_sentence: true },
  },
  data_loader: { batch_sampler: { type: "bucket", batch_size: 32, sorting_keys: ["tokens"] } },
  validation_data_loader: {
    batch_sampler: { type: "bucket", batch_size: 32, sorting_keys: ["tokens"], shuffle: false },
  },
  trainer: {
    // The paper gives no learning rate; 0.01 learns the fixtures in about 20 epochs.
    optimizer: { type: "adam", lr: 0.01 },
    num_epochs: 100,
    patience: 10,
    validation_metric: "+f1-measure-overall",
    // Python's full garbage collections skip the loaded data sets;
    // distributed training leaves its process group when it ends (leave_process_group, last).
    callbacks: [{ type: "freeze_loaded_data" }, { type: "leave_process_group" }],
  },
};

data.on(config)
