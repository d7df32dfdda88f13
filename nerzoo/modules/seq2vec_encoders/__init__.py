"""Seq2VecEncoders: `fofe_encoder.FofeEncoder` (FOFE character encoder)."""
