"""A Hugging Face causal LM as its users write a training step: the model
built directly from its config (use_cache left at its default, True, and the
default attention), forward returning transformers' own next-token loss for
labels = the input ids (test/lit/export/hf-lm-loss.test)."""
import torch
import transformers


class GPT2LanguageModelLoss(torch.nn.Module):
    def __init__(self, layers=2, width=64, heads=4, vocab=256, positions=32):
        super().__init__()
        config = transformers.GPT2Config(n_layer=layers, n_embd=width, n_head=heads,
                                         vocab_size=vocab, n_positions=positions,
                                         bos_token_id=0, eos_token_id=0)
        self.model = transformers.GPT2LMHeadModel(config)

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, labels=input_ids).loss


class GPT2TrainerLoss(GPT2LanguageModelLoss):
    """The loss as transformers' Trainer asks for it under gradient
    accumulation: labels with -100 padding and num_items_in_batch (the
    counted labels of all micro-batches), so the loss is the sum over this
    batch's tokens divided by it (reduction='sum')."""

    def forward(self, input_ids, labels, num_items_in_batch):
        return self.model(input_ids=input_ids, labels=labels,
                          num_items_in_batch=num_items_in_batch).loss
