// ME-CRF+ for forum thread discourse structure (links and dialogue acts): Liu, Baldwin & Cohn (2017),
// "Capturing Long-range Contextual Dependencies with Memory-enhanced Conditional Random Fields",
// IJCNLP, https://aclanthology.org/I17-1056, section 4.  The settings of §4.2: word embeddings of
// size 20 (trainable, randomly initialised), title and text encoders Phi_title / Phi_text each a
// word-level bidirectional GRU of hidden size 20 whose [last forward; first backward] states are
// tanh-projected (like eq. 3) to 20, W_s 50 x 2 (structural features), W_p 100 x 3 (punctuation
// features), a tied memory (m = c) over a post-level BiGRU of hidden size 50 with the dummy head
// m_0 = 0, one hop, alpha = 0.5, dropout keep rate 0.7 (dropout 0.3) on the GRUs' inputs and
// outputs, Adam, batch size 32, 50 epochs, and the ME-CRF+ curriculum (CRF transitions fixed at 0
// for the first 20 epochs).
//
// Variants of Table 1:
//   ME-CRF+ (this file, default)
//   ME-CRF, no curriculum:   -o '{"trainer.callbacks": []}'
//   MEMNET, no CRF (eq. 13): -o '{"model.head.use_crf": false, "trainer.callbacks": []}'
//
// Trains on the synthetic fixtures by default (fixtures/thread_discourse, see its README: the CNET data is
// not distributed).  Other data: -o '{"train_data_path": "...", "validation_data_path": "...",
// "test_data_path": "..."}'.  The paper's evaluation is 10-fold cross-validation over threads:
//   allennlp cross-validate-thread-discourse training_config/me_crf_thread_discourse.jsonnet threads.jsonl --folds 10 -s OUT \
//     --include-package nerzoo
// Not given in the paper, chosen here: words are lower-cased; the learning rate is 0.01 (Adam's
// default 0.001 moves 50 one-batch epochs of the 24 fixture threads too little: dev joint F1 0.50
// instead of 0.64); the link loss is supervised on the one hop's attention (model.link_hop); the
// archived model is the epoch with the best dev joint F1 (cross-validate-thread-discourse trains without
// validation data and keeps the last epoch).
//
// Batches hold threads of similar length in posts (the `bucket` batch sampler sorted by the number
// of `texts`, 10% noise, shuffled batches; validation batches in length order without noise): the
// post-level GRU and the memory run over the longest thread of a batch, and the title and text
// encoders over every post slot of it (texts are cut at `max_text_tokens`, so the number of posts is
// what varies most). See bilstm_crf.jsonnet for overriding batch sizes.
local word_dim = 20;
local phi_hidden_dim = 20;
local post_dim = 20;
local structural_dim = 50;
local punctuation_dim = 100;
local memory_hidden_dim = 50;
local dropout = 0.3;
local phi_encoder = { type: "gru", input_size: word_dim, hidden_size: phi_hidden_dim, bidirectional: true };

{
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
    callbacks: [{ type: "crf_transition_curriculum", frozen_epochs: 20 }],
  },
}
