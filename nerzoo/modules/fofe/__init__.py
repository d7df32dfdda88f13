"""FOFE-NER's parts: FOFE codes, span enumeration and features, the factored first layer, span decoding and the second pass."""
