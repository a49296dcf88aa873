"""The policy's tokenizer: a vocabulary of our own, wrapped as a `transformers` fast tokenizer.

Wrapping it as `PreTrainedTokenizerFast` (WordLevel, whitespace split, a chat template) makes the toy
policy look like a real model to everything around it: the server renders chat messages with
`apply_chat_template`, encodes and decodes as a Hugging Face model would, and it saves and loads with
`save_pretrained` / `AutoTokenizer.from_pretrained`, offline.
"""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
#: The words of the toy tasks: digits and `=` (the answer follows it).
WORDS = [str(d) for d in range(10)] + ["="]
VOCAB = [PAD, BOS, EOS, UNK, *WORDS]
#: The prompt is the beginning of sequence and the messages' text; the model answers after it.
CHAT_TEMPLATE = "{{ bos_token }}{% for message in messages %}{{ message['content'] }} {% endfor %}"


def make_tokenizer() -> PreTrainedTokenizerFast:
    """Words are whitespace-separated; decoding joins them with single spaces ("3 2 1")."""
    core = Tokenizer(models.WordLevel({word: i for i, word in enumerate(VOCAB)}, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with a space
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                   unk_token=UNK, chat_template=CHAT_TEMPLATE)
