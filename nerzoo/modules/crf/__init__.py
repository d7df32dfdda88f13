"""The CRF tag head: its scorers and decoder, the batched CRF and its scans, marginals and calibration."""
