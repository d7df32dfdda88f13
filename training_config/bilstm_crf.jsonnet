// BiLSTM-CNN-CRF, Ma & Hovy (2016), https://aclanthology.org/P16-1101: nerzoo's baseline NER model.
// Lower-cased GloVe words + a character CNN, a BiLSTM and a constrained CRF over BIOUL tags, SGD as
// the paper; batches of sentences of similar length (`bucket` sampler: override
// `data_loader.batch_sampler.batch_size`, not `data_loader.batch_size`).
// Data: the fixtures (default), conll2003, uner_ewt, wnut17 (training_config/data.libsonnet).
local data = import "data.libsonnet";
local glove = "fixtures/embeddings/tiny_glove.txt";
local word_dim = 50;
local char_dim = 16;
local char_filters = 64;
local lstm_dim = 200;  // per direction, as Ma & Hovy

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
    tag_scheme: "BIOUL",
    token_indexers: {
      tokens: { type: "single_id", lowercase_tokens: true },
      token_characters: { type: "characters", min_padding_length: 3 },
    },
  },
  train_data_path: "fixtures/conll2003/train.txt",
  validation_data_path: "fixtures/conll2003/dev.txt",
  test_data_path: "fixtures/conll2003/test.txt",
  evaluate_on_test: true,
  vocabulary: {
    type: "from_instances",
    pretrained_files: { tokens: glove },
    min_pretrained_embeddings: { tokens: 60000 },
  },
  model: {
    type: "bilstm_crf",
    text_field_embedder: {
      token_embedders: {
        tokens: { type: "embedding", embedding_dim: word_dim, pretrained_file: glove, trainable: true },
        token_characters: {
          type: "fast_character_encoding",
          embedding: { embedding_dim: char_dim, vocab_namespace: "token_characters" },
          encoder: { type: "cnn", embedding_dim: char_dim, num_filters: char_filters, ngram_filter_sizes: [3], conv_layer_activation: "relu" },
        },
      },
    },
    encoder: { type: "fast_lstm", input_size: word_dim + char_filters, hidden_size: lstm_dim, num_layers: 1, bidirectional: true },
    dropout: 0.5,
    // Training batches are decoded for the training metrics 50 at a time (the same epoch metrics).
    head: { tag_scheme: "BIOUL", constrain_crf_decoding: true, training_decode_interval: 50 },
  },
  data_loader: { batch_sampler: { type: "bucket", batch_size: 10, sorting_keys: ["tokens"] } },
  validation_data_loader: {
    batch_sampler: { type: "bucket", batch_size: 64, sorting_keys: ["tokens"], shuffle: false },
  },
  trainer: {
    // Ma & Hovy's SGD: momentum 0.9, rate 0.015 on the batch's summed loss, decayed after every epoch
    // (x0.95, close to their 0.015 / (1 + 0.05 t) over the first 30 epochs); docs/RESULTS.md compares Adam.
    optimizer: { type: "sgd", lr: 0.015, momentum: 0.9 },
    learning_rate_scheduler: { type: "exponential", gamma: 0.95 },
    grad_norm: 5.0,
    num_epochs: 50,
    patience: 5,
    validation_metric: "+f1-measure-overall",
    // Python's full garbage collections skip the loaded data sets;
    // distributed training leaves its process group when it ends (leave_process_group, last).
    callbacks: [{ type: "freeze_loaded_data" }, { type: "leave_process_group" }],
  },
};

data.on(config)
