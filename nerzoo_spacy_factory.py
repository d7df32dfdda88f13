"""
The spaCy factory "nerzoo_ner" (`nerzoo.spacy_pipeline.NerzooTagger`), kept out of the `nerzoo`
package: spaCy imports every `spacy_factories` entry point whenever it creates a pipeline, and
`nerzoo` imports allennlp and torch.  nerzoo is imported only when a pipeline adds the component.
"""

from typing import Optional

from spacy.language import Language
from spacy.pipeline import Pipe


@Language.factory(
    "nerzoo_ner",
    assigns=["doc.ents", "token.ent_iob", "token.ent_type", "span._.confidence", "token._.nerzoo_tag"],
    default_config={"archive": None, "cuda_device": -1, "batch_size": 64, "existing_ents": "replace"},
    default_score_weights={"ents_f": 1.0, "ents_p": 0.0, "ents_r": 0.0, "ents_per_type": None},
)
def make_nerzoo_ner(
    nlp: Language, name: str, archive: Optional[str], cuda_device: int, batch_size: int, existing_ents: str
) -> Pipe:
    from nerzoo.spacy_pipeline import NerzooTagger

    return NerzooTagger(nlp, name, archive, cuda_device, batch_size, existing_ents)
