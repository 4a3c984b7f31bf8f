"""Independent tokenizer for checking lowbit's: the Hugging Face `tokenizers` BPE built from
the GGUF's vocabulary and merges with SmolLM2's pre-tokenizer (Digits(individual_digits) then
ByteLevel(add_prefix_space=False), as in SmolLM2's tokenizer.json)."""
import gguf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers


def field_strings(reader, key):
    f = reader.fields[key]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def build(reader):
    tokens = field_strings(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in field_strings(reader, "tokenizer.ggml.merges")]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    return tok


if __name__ == "__main__":
    import sys
    r = gguf.GGUFReader(sys.argv[1])
    t = build(r)
    for s in sys.argv[2:]:
        print(repr(s), t.encode(s).ids)
