// Seq2Biseq, Dinarelli & Grobol (2019), https://arxiv.org/abs/1904.04733: character GRU, word BiGRU,
// backward and forward label decoders (eq. 1-8), chunking in BIO; settings of §4.2 for WSJ with
// GloVe 6B 50d words, Adam with linear decay. Variants: docs/seq2biseq.md.
// POS tagging: seq2biseq_pos.jsonnet.
// Data: the fixtures (default, the chunk column) or conll2000_chunking (training_config/data.libsonnet).
local data = import "data.libsonnet";
local glove = "fixtures/embeddings/tiny_glove.txt";
local word_dim = 50;
local char_dim = 30;
local char_gru_dim = 100;
local hidden_dim = 150;

local reader = {
  type: "conll_columns",
  tag_column: 2,
  file_tag_scheme: "BIO",
  tag_scheme: "BIO",
  token_indexers: {
    tokens: { type: "single_id", lowercase_tokens: true },
    token_characters: { type: "characters", min_padding_length: 1 },
  },
};

local config = {
  // allennlp's train loop, the test set read whole after distributed training (nerzoo/training/whole_test_set.py).
  type: "whole_test_set",
  // What training_config/data.libsonnet needs on a real data set (hidden).
  on_real_data:: {
    task: "chunking",
    glove: ["vocabulary.pretrained_files.tokens", "model.text_field_embedder.token_embedders.tokens.pretrained_file"],
  },
  dataset_reader: reader,
  validation_dataset_reader: reader,
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
    type: "seq2biseq",
    text_field_embedder: {
      token_embedders: {
        tokens: { type: "embedding", embedding_dim: word_dim, pretrained_file: glove, trainable: true },
        token_characters: {
          type: "fast_character_encoding",
          embedding: { embedding_dim: char_dim, vocab_namespace: "token_characters" },
          encoder: { type: "summed_gru", input_dim: char_dim, hidden_dim: char_gru_dim, output_dim: char_gru_dim },
        },
      },
    },
    encoder: { type: "gru", input_size: word_dim + char_gru_dim, hidden_size: hidden_dim, bidirectional: true },
    label_embedding_dim: 150,
    decoder_hidden_dim: hidden_dim,
    tag_scheme: "BIO",
    dropout: 0.5,
    regularizer: {
      regexes: [
        // Every parameter but the word and character embedding tables.
        ["^(?!text_field_embedder\\.(token_embedder_tokens\\.|token_embedder_token_characters\\._embedding\\.))", { type: "l2", alpha: 5e-5 }],
      ],
    },
  },
  data_loader: { batch_sampler: { type: "bucket", batch_size: 100, sorting_keys: ["tokens"] } },
  validation_data_loader: {
    batch_sampler: { type: "bucket", batch_size: 100, sorting_keys: ["tokens"], shuffle: false },
  },
  trainer: {
    optimizer: { type: "adam", lr: 0.001 },
    learning_rate_scheduler: { type: "linear_with_warmup", warmup_steps: 0 },
    num_epochs: 40,
    patience: 10,
    validation_metric: "+accuracy",
    // Python's full garbage collections skip the loaded data sets;
    // distributed training leaves its process group when it ends (leave_process_group, last).
    callbacks: [{ type: "freeze_loaded_data" }, { type: "leave_process_group" }],
  },
};

data.on(config)
