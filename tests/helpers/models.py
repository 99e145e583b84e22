"""Tiny randomly initialised models for fast tests."""

import torch

__all__ = ["build_tiny_model"]


def build_tiny_model(path, tokenizer=None):
    """Save a 2-layer, 32-wide random BERT with the bundled WordPiece tokenizer to ``path``."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from fmmlearn.modeling import resolve_model_path

    tokenizer = tokenizer or AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=2,
        pad_token_id=tokenizer.pad_token_id,
    )
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


class one_thread:
    """torch on one thread, like each Dask worker or launched process (torch's reductions depend on it)."""

    def __enter__(self):
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self.threads)
