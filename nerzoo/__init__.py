"""
nerzoo: AllenNLP components for sequence labelling and named-entity recognition.

Importing the package registers every component (readers, metrics, models, predictors), so
`allennlp ... --include-package nerzoo` and the `.allennlp_plugins` file both work.
"""
from nerzoo.commands.tag_text import TagText
from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.models.bilstm_crf import BiLstmCrfTagger
from nerzoo.modules.crf_tag_head import CrfTagHead
from nerzoo.predictors.entity_tagger import EntityTaggerPredictor
from nerzoo.training.metrics.conll_span_f1 import ConllSpanF1

__all__ = [
    "BiLstmCrfTagger",
    "ConllColumnsReader",
    "ConllSpanF1",
    "CrfTagHead",
    "EntityTaggerPredictor",
    "TagText",
]
