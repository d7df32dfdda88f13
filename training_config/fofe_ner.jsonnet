// FOFE-NER, Xu (2017), "Fixed-size Ordinally-Forgetting Encoding and Its Applications", MSc thesis,
// York University, ch. 5 (settings of §5.5.1 scaled to CPU): every fragment of up to 7 words is
// classified from FOFE codes of its contexts, words and characters by a 3 x 512 ReLU net; Adam in
// place of SGD. Second pass: fofe_ner_second_pass.jsonnet. More: docs/fofe_ner.md.
// Data: the fixtures (default) or conll2003 (training_config/data.libsonnet).
local data = import "data.libsonnet";
local glove = "fixtures/embeddings/tiny_glove.txt";
local word_dim = 50;

local config = {
  // allennlp's train loop, the test set read whole after distributed training (nerzoo/training/whole_test_set.py).
  type: "whole_test_set",
  // What training_config/data.libsonnet needs on a real data set (hidden).
  on_real_data:: {
    task: "NER",
    glove: ["vocabulary.pretrained_files.lowercase_tokens", "model.word_embedders.lowercase_tokens.pretrained_file"],
  },
  dataset_reader: {
    type: "entity_spans",
    file_format: "conll",
    conll: { tag_column: 3, file_tag_scheme: "IOB1" },
    token_indexers: {
      tokens: { type: "single_id", namespace: "tokens" },
      lowercase_tokens: { type: "single_id", namespace: "lowercase_tokens", lowercase_tokens: true },
      token_characters: { type: "characters", min_padding_length: 1 },
    },
  },
  train_data_path: "fixtures/conll2003/train.txt",
  validation_data_path: "fixtures/conll2003/dev.txt",
  test_data_path: "fixtures/conll2003/test.txt",
  evaluate_on_test: true,
  datasets_for_vocab_creation: ["train"],
  vocabulary: {
    type: "from_instances",
    min_count: { tokens: 2, lowercase_tokens: 2 },
    pretrained_files: { lowercase_tokens: glove },
    min_pretrained_embeddings: { lowercase_tokens: 60000 },
  },
  model: {
    type: "fofe_ner",
    word_embedders: {
      tokens: { type: "embedding", embedding_dim: word_dim, vocab_namespace: "tokens" },
      lowercase_tokens: {
        type: "embedding",
        embedding_dim: word_dim,
        vocab_namespace: "lowercase_tokens",
        pretrained_file: glove,
        trainable: true,
      },
    },
    max_span_width: 7,
    alpha: 0.5,
    character_dim: 64,
    cnn_filters: 16,
    cnn_kernel_sizes: [2, 3, 4, 5, 6, 7, 8, 9],
    feedforward: { num_layers: 3, hidden_dims: 512, activations: "relu", dropout: 0.4 },
    dropout: 0.4,
    overlap_sample_rate: 0.36,
    disjoint_sample_rate: 0.09,
    decoding: ["highest_first"],
    thresholds: [0.5],
    initializer: { regexes: [["feedforward.*weight|output_layer.weight", { type: "xavier_uniform" }]] },
  },
  data_loader: { batch_sampler: { type: "bucket", batch_size: 32, sorting_keys: ["tokens"] } },
  validation_data_loader: { batch_sampler: { type: "bucket", batch_size: 64, sorting_keys: ["tokens"], shuffle: false } },
  trainer: {
    optimizer: { type: "adam", lr: 0.001 },
    learning_rate_scheduler: { type: "geometric_decay", final_factor: 1 / 16 },
    callbacks: [{ type: "freeze_loaded_data" }, { type: "dropout_schedule", start: 0.4, end: 0.1 }, { type: "leave_process_group" }],
    grad_norm: 5.0,
    num_epochs: 30,
    patience: 10,
    validation_metric: "+f1-measure-overall",
  },
};

data.on(config)
