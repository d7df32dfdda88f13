// ME-CRF+ for forum thread discourse structure (links and dialogue acts), Liu, Baldwin & Cohn (2017),
// https://aclanthology.org/I17-1056 (§4, settings of §4.2): GRU title/text encoders, a tied memory
// over the posts, one hop, CRF with the curriculum (transitions frozen for 20 epochs).
// Variants of Table 1, 10-fold cross-validation (`cross-validate-thread-discourse`): docs/me_crf.md.
// Data: the fixtures only (the synthetic fixtures/thread_discourse; CNET is not distributed).
local data = import "data.libsonnet";
local word_dim = 20;
local phi_hidden_dim = 20;
local post_dim = 20;
local structural_dim = 50;
local punctuation_dim = 100;
local memory_hidden_dim = 50;
local dropout = 0.3;
local phi_encoder = { type: "gru", input_size: word_dim, hidden_size: phi_hidden_dim, bidirectional: true };

local config = {
  // allennlp's train loop, the test set read whole after distributed training (nerzoo/training/whole_test_set.py).
  type: "whole_test_set",
  // What training_config/data.libsonnet needs on a real data set (hidden): no pretrained files.
  on_real_data:: { task: "thread discourse", glove: [] },
  dataset_reader: {
    type: "thread_discourse",
    token_indexers: { tokens: { type: "single_id", lowercase_tokens: true } },
  },
  train_data_path: "fixtures/thread_discourse/train.jsonl",
  validation_data_path: "fixtures/thread_discourse/dev.jsonl",
  test_data_path: "fixtures/thread_discourse/test.jsonl",
  evaluate_on_test: true,
  model: {
    type: "me_crf_thread_discourse",
    text_field_embedder: {
      token_embedders: { tokens: { type: "embedding", embedding_dim: word_dim, trainable: true } },
    },
    title_encoder: phi_encoder,
    text_encoder: phi_encoder,
    post_dim: post_dim,
    structural_dim: structural_dim,
    punctuation_dim: punctuation_dim,
    // input_dim = 2 * post_dim + structural_dim + punctuation_dim is filled in by the model.
    memory: {
      hidden_dim: memory_hidden_dim,
      num_hops: 1,
      tie_memories: true,
      null_memory: true,
      causal: true,
      include_self: false,
      dropout: dropout,
    },
    head: { use_crf: true },
    alpha: 0.5,
    link_hop: -1,
    dropout: dropout,
  },
  data_loader: { batch_sampler: { type: "bucket", batch_size: 32, sorting_keys: ["texts"] } },
  validation_data_loader: { batch_sampler: { type: "bucket", batch_size: 32, sorting_keys: ["texts"], shuffle: false } },
  trainer: {
    optimizer: { type: "adam", lr: 0.01 },
    num_epochs: 50,
    validation_metric: "+joint_f1",
    callbacks: [{ type: "freeze_loaded_data" }, { type: "crf_transition_curriculum", frozen_epochs: 20 }, { type: "leave_process_group" }],
  },
};

data.on(config)
