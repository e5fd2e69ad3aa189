"""A failure's message goes up the call chain in a struct err (init/lib/err.h,
docs/architecture.md Conventions), not in a (buffer, length) pair: no
function of hearth's or hearthctl's takes `char *err, size_t errlen`, or
the same under another name (why, what, msg, problem, detail). The last
test feeds the check such a declaration and sees it fail."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layers as L  # noqa: E402

# A parameter "char *<message name>, size_t <n>", or a length named like
# the pair's length wherever it is.
MESSAGE_PAIR = re.compile(
    r"char\s*\*\s*(?:err|why|what|msg|problem|detail|emsg|error)\w*\s*,\s*size_t\s+\w+\s*[,)]"
    r"|\bsize_t\s+(?:errlen|whylen|wlen|whatlen|msglen|errsz)\b")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def message_pairs(path, text=None):
    if text is None:
        with open(os.path.join(L.ROOT, path), encoding="utf-8") as f:
            text = f.read()
    code = COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    return [f"{path}:{code.count(chr(10), 0, m.start()) + 1}: {m.group(0).strip()}"
            for m in MESSAGE_PAIR.finditer(code)]


def test_no_message_buffer_pairs():
    bad = [hit for p in L.guest_sources() + L.host_sources() for hit in message_pairs(p)]
    assert bad == [], ("take a struct err * (init/lib/err.h) instead:\n" + "\n".join(bad))


def test_a_message_buffer_pair_fails_the_check():
    assert message_pairs("x.h", "int f(int fd, char *why, size_t whylen);\n") != []
    assert message_pairs("x.h", "int f(int fd,\n       char *err, size_t n);\n") != []
    assert message_pairs("x.c", "struct w {\n    size_t errlen;\n};\n") != []
    # A comment, or a buffer that is not a message, is not one.
    assert message_pairs("x.h", "/* char *err, size_t errlen */\n"
                                "int g(char *buf, size_t len, struct err *err);\n") == []
