"""
nerzoo: AllenNLP components for sequence labelling and named-entity recognition.

Importing the package registers every component (readers, encoders, metrics, models, predictors,
subcommands, the train loop), so `allennlp ... --include-package nerzoo` and the `.allennlp_plugins`
file both work.  It does nothing else: no environment variable is set, no other library is changed.
"""

# ruff: noqa: F401  (each import registers its components)
from nerzoo import other_names
from nerzoo.commands.calibrate import Calibrate
from nerzoo.commands.cross_estimate import CrossEstimate
from nerzoo.commands.cross_validate_thread_discourse import CrossValidateThreadDiscourse
from nerzoo.commands.draw_attention import DrawAttention
from nerzoo.commands.draw_calibration import DrawCalibration
from nerzoo.commands.draw_memory import DrawMemory
from nerzoo.commands.export import Export
from nerzoo.commands.select import Select
from nerzoo.commands.serve import Serve
from nerzoo.commands.tag_text import TagText
from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.data.dataset_readers.conllu_ner import ConlluNerReader
from nerzoo.data.dataset_readers.entity_spans import EntitySpansReader
from nerzoo.data.dataset_readers.spacy_docbin import SpacyDocBinReader
from nerzoo.data.dataset_readers.spacy_parsed_conll import SpacyParsedConllReader
from nerzoo.data.dataset_readers.thread_discourse import ThreadDiscourseReader
from nerzoo.data.token_indexers.contextual_word_pieces_indexer import ContextualWordPiecesIndexer
from nerzoo.data.token_indexers.lexical_features_indexer import LexicalFeaturesIndexer
from nerzoo.data.token_indexers.word_and_characters_indexer import WordAndCharactersIndexer
from nerzoo.metrics.concept_error_rate import ConceptErrorRate
from nerzoo.metrics.conll_span_f1 import ConllSpanF1
from nerzoo.metrics.span_calibration import SpanCalibration
from nerzoo.metrics.span_set_f1 import SpanSetF1
from nerzoo.metrics.thread_discourse_f1 import ThreadDiscourseF1
from nerzoo.models.bilstm_crf import BiLstmCrf
from nerzoo.models.deptree_ner import DeptreeNer
from nerzoo.models.fofe_ner import FofeNer
from nerzoo.models.me_crf import MeCrf
from nerzoo.models.me_crf_thread_discourse import MeCrfThreadDiscourse
from nerzoo.models.seq2biseq import Seq2Biseq
from nerzoo.modules.crf.tag_head import TagHead
from nerzoo.modules.seq2seq_encoders.child_sum_tree_lstm import ChildSumTreeLstm
from nerzoo.modules.seq2seq_encoders.fast_lstm import FastLstm
from nerzoo.modules.seq2seq_encoders.global_attention import GlobalAttention
from nerzoo.modules.seq2seq_encoders.memory_hop import MemoryHopEncoder
from nerzoo.modules.seq2seq_encoders.relative_attention import RelativeAttention
from nerzoo.modules.seq2seq_encoders.residual_stack import ResidualStack
from nerzoo.modules.seq2vec_encoders.fofe_encoder import FofeEncoder
from nerzoo.modules.seq2vec_encoders.summed_gru_encoder import SummedGruEncoder
from nerzoo.modules.token_embedders.char_gated_embedder import CharGatedEmbedder
from nerzoo.modules.token_embedders.contextual_word_vectors import ContextualWordVectors
from nerzoo.modules.token_embedders.fast_character_encoding import FastCharacterEncoder
from nerzoo.modules.token_embedders.lexical_features_embedder import LexicalFeaturesEmbedder
from nerzoo.modules.token_embedders.word_dropout import WordDropout
from nerzoo.predictors.sequence_tagger import SequenceTaggerPredictor
from nerzoo.predictors.thread_discourse import ThreadDiscoursePredictor
from nerzoo.training.callbacks.crf_transition_curriculum import CrfTransitionCurriculum
from nerzoo.training.callbacks.cuda_graphs import CudaGraphs
from nerzoo.training.callbacks.dropout_schedule import DropoutSchedule
from nerzoo.training.callbacks.freeze_loaded_data import FreezeLoadedData
from nerzoo.training.callbacks.leave_process_group import LeaveProcessGroupAfterTraining
from nerzoo.training.learning_rate_schedulers.geometric_decay import GeometricDecay
from nerzoo.training.whole_test_set import WholeTestSetTrainModel
