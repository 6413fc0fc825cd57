"""Treebank readers and writers, tree helpers and transforms of sklstruct.parsing."""

import functools
import gzip
import io
import os

import numpy as np
import pytest

from sklstruct.parsing import (
    binarize,
    collapse_unary,
    expand_unary,
    from_nltk,
    labelled_spans,
    read_conll,
    read_dependency_columns,
    read_ptb_trees,
    to_nltk,
    tree_from_string,
    tree_tags,
    tree_to_string,
    tree_words,
    unbinarize,
    write_conll,
)

from ._parsing_reference import random_tree

# ------------------------------------------------------------------------ inline samples
CONLLX = (
    "1\tGizonak\tgizon\tIZE\tIZE_ARR\tERG|NUMS\t2\tncsubj\t_\t_\n"
    "2\tikusi\tikusi\tADI\tADI_SIN\tPART\t0\tROOT\t_\t_\n"
    "3\tdu\t*edun\tADL\tADL\t_\t2\tauxmod\t_\t_\n"
    "4\t.\t.\tPUNT\tPUNT_PUNT\t_\t3\tPUNC\t_\t_\n"
    "\n"
    "1\tBai\tbai\tPRT\tPRT\t_\t0\tROOT\t_\t_\n"
    "\n"
)

CONLLU = (
    "# sent_id = 1\n"
    "# text = Vámonos al mar.\n"
    "1-2\tVámonos\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "1\tVamos\tir\tVERB\t_\tMood=Imp\t0\troot\t_\t_\n"
    "2\tnos\tnosotros\tPRON\t_\tCase=Acc\t1\tobj\t_\t_\n"
    "3-4\tal\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "3\ta\ta\tADP\t_\t_\t5\tcase\t_\t_\n"
    "4\tel\tel\tDET\t_\t_\t5\tdet\t_\t_\n"
    "4.1\tmismo\tmismo\tADJ\t_\t_\t_\t_\t5:amod\t_\n"
    "5\tmar\tmar\tNOUN\t_\t_\t1\tobl\t_\tSpaceAfter=No\n"
    "6\t.\t.\tPUNCT\t_\t_\t1\tpunct\t_\t_\n"
    "\n"
)

DEPENDENCY_COLUMNS = "Dogs\tNNS\t2\nbark\tVBP\t0\n.\t.\t2\n\nYes\tUH\t0\n"

# Penn Treebank style: an outer unlabelled bracket per sentence, function tags, co-indices
# (also with "="), traces, -LRB-/-RRB- tags, and a TOP-labelled wrapper
PTB = """( (S
    (NP-SBJ-1 (DT The) (NN deal) )
    (VP (VBD was)
      (VP (VBN made)
        (NP (-NONE- *-1) )
        (PP-LOC=2 (IN in)
          (NP (NNP Paris) (-LRB- -LRB-) (NNP France) (-RRB- -RRB-) ))))
    (. .) ))
( (SINV (S-TPC-3 (NP-SBJ (-NONE- *T*-2)) (VP (VBZ Hi)))
    (VP (VBD said) (SBAR (-NONE- 0) (S (-NONE- *T*-3)))) (NP-SBJ (PRP he)) (. .)))
(TOP (FRAG (ADVP (RB Now)) (. !)))
"""

PTB_CLEAN = [
    "(S (NP (DT The) (NN deal)) (VP (VBD was) (VP (VBN made) (PP (IN in) (NP (NNP Paris) "
    "(-LRB- -LRB-) (NNP France) (-RRB- -RRB-))))) (. .))",
    "(SINV (S (VP (VBZ Hi))) (VP (VBD said)) (NP (PRP he)) (. .))",
    "(FRAG (ADVP (RB Now)) (. !))",
]

TREES = [
    "(S (NP (DT the) (JJ big) (JJ red) (NN dog)) (VP (VBZ barks) (ADVP (RB loudly))) (. .))",
    "(S (NP (PRP it)) (VP (VBZ works)))",
    "(S (VP (VB Go)))",
    "(NP (NP (NNP John)) (, ,) (NP (DT a) (NN friend) (POS 's) (NN dog)) (, ,) (NN x) (NN y))",
    "(NN Hi)",
    "(ADVP|PRT (RB up) (-LRB- -LRB-) (SYM =) (-RRB- -RRB-))",
]


# -------------------------------------------------------------------------------- CoNLL
def test_read_conllx_inline():
    data = read_conll(io.StringIO(CONLLX))
    assert data.format == "conllx"
    assert len(data.sentences) == 2
    assert data.sentences[0][0] == {"form": "Gizonak", "lemma": "gizon", "cpostag": "IZE",
                                    "postag": "IZE_ARR", "feats": "ERG|NUMS"}
    assert data.sentences[0][2]["feats"] == "_"  # "_" kept as given
    assert [h.tolist() for h in data.heads] == [[2, 0, 2, 3], [0]]
    assert all(h.dtype == np.int64 for h in data.heads)
    assert data.relations[0].dtype == object
    assert data.relations[0].tolist() == ["ncsubj", "ROOT", "auxmod", "PUNC"]


def test_read_conllu_skips_comments_ranges_and_empty_nodes():
    data = read_conll(io.StringIO(CONLLU))
    assert data.format == "conllu"
    [tokens] = data.sentences
    assert [t["form"] for t in tokens] == ["Vamos", "nos", "a", "el", "mar", "."]
    assert tokens[0] == {"form": "Vamos", "lemma": "ir", "upos": "VERB", "xpos": "_",
                         "feats": "Mood=Imp", "misc": "_"}
    assert tokens[4]["misc"] == "SpaceAfter=No"
    assert data.heads[0].tolist() == [0, 1, 5, 5, 1, 1]
    assert data.relations[0].tolist() == ["root", "obj", "case", "det", "obl", "punct"]


def test_read_conll_format_choice(tmp_path):
    plain = "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n\n"
    # without comments or multiword ids, auto reads CoNLL-X unless the path says .conllu
    assert read_conll(io.StringIO(plain)).format == "conllx"
    assert set(read_conll(io.StringIO(plain), columns="conllu").sentences[0][0]) == {
        "form", "lemma", "upos", "xpos", "feats", "misc"}
    path = tmp_path / "a.conllu"
    path.write_text(plain, encoding="utf-8")
    assert read_conll(path).format == "conllu"
    assert read_conll(str(path), columns="conllx").format == "conllx"
    with pytest.raises(ValueError, match="columns must be one of"):
        read_conll(io.StringIO(plain), columns="conll")
    # a comment line is malformed CoNLL-X
    with pytest.raises(ValueError, match="line 1: expected 10"):
        read_conll(io.StringIO(CONLLU), columns="conllx")


def test_read_conll_paths_gzip_and_encoding(tmp_path):
    text = "1\tÑandú\tñandú\tN\tN\t_\t0\tROOT\t_\t_\n\n"
    plain, packed = tmp_path / "s.conll", tmp_path / "s.conll.gz"
    plain.write_bytes(text.encode("latin-1"))
    with gzip.open(packed, "wt", encoding="latin-1") as f:
        f.write(text)
    for path in (plain, packed, str(packed)):
        assert read_conll(path, encoding="latin-1").sentences[0][0]["form"] == "Ñandú"
    # the encoding is the caller's to give; the error names the line and the option
    with pytest.raises(ValueError, match=r"line 1 is not valid utf-8.*encoding='latin-1'"):
        read_conll(plain)
    # the line of the byte, deep in a file whose decoder fails on a whole chunk
    deep = tmp_path / "deep.conll"
    sentences = [f"1\tw{i}\t_\tN\tN\t_\t0\tROOT\t_\t_\n\n" for i in range(3000)]
    sentences[1700] = text
    deep.write_bytes("".join(sentences).encode("latin-1"))
    with pytest.raises(ValueError, match=r"line 3401 is not valid utf-8"):
        read_conll(deep)
    deep.write_bytes("".join(sentences).replace("\n", "\r\n").encode("latin-1"))
    with pytest.raises(ValueError, match=r"line 3401 is not valid utf-8"):
        read_conll(deep)
    with pytest.raises(ValueError, match="encoding="):
        read_conll(packed)
    with open(plain, encoding="latin-1") as f:  # an open file keeps its own encoding
        assert read_conll(f).sentences[0][0]["lemma"] == "ñandú"
    with open(plain, "rb") as f, pytest.raises(TypeError, match="text mode"):
        read_conll(f)
    with pytest.raises(TypeError, match="path or an open text file"):
        read_conll(42)


@pytest.mark.parametrize("line, message", [
    ("1\tA\ta\tN\tN\t_\t0\tROOT\t_\n", "line 2: expected 10 tab-separated columns, got 9"),
    ("1 A a N N _ 0 ROOT _ _\n", "line 2: expected 10 tab-separated columns, got 1"),
    ("1\tA\ta\tN\tN\t_\t_\tROOT\t_\t_\n", "line 2: the head '_' is not an integer"),
    ("1\tA\ta\tN\tN\t_\tx1\tROOT\t_\t_\n", "line 2: the head 'x1' is not an integer"),
    ("2\tA\ta\tN\tN\t_\t0\tROOT\t_\t_\n", r"line 2: token id 2 out of order \(expected 1\)"),
    ("a\tA\ta\tN\tN\t_\t0\tROOT\t_\t_\n", "line 2: the token id 'a' is not an integer"),
    ("1-2\tA\ta\tN\tN\t_\t0\tROOT\t_\t_\n", "line 2: the token id '1-2' is not an integer"),
    ("1\tA\ta\tN\tN\t_\t3\tROOT\t_\t_\n", r"line 2: head 3 is outside 0..1"),
    ("1\tA\ta\tN\tN\t_\t-1\tROOT\t_\t_\n", r"line 2: head -1 is outside 0..1"),
    ("1\tA\ta\tN\tN\t_\t1\tROOT\t_\t_\n", "line 2: token 1 is its own head"),
])
def test_read_conll_malformed_lines(line, message):
    text = "\n" + line + "\n"  # the bad line is line 2
    with pytest.raises(ValueError, match=message):
        read_conll(io.StringIO(text), columns="conllx")


def test_read_conll_ids_out_of_order_in_a_sentence():
    text = CONLLX.replace("3\tdu", "4\tdu")
    with pytest.raises(ValueError, match=r"line 3: token id 4 out of order \(expected 3\)"):
        read_conll(io.StringIO(text))
    text = CONLLX.replace("4\t.", "3\t.")
    with pytest.raises(ValueError, match=r"line 4: token id 3 out of order \(expected 4\)"):
        read_conll(io.StringIO(text))


def test_read_conll_blank_lines_and_line_endings():
    text = "\n\n" + CONLLX.replace("\n", "\r\n") + "\n  \n"
    data = read_conll(io.StringIO(text, newline=""))
    assert [h.tolist() for h in data.heads] == [[2, 0, 2, 3], [0]]
    assert data.relations[0][-1] == "PUNC"
    empty = read_conll(io.StringIO(""))
    assert empty.sentences == [] and empty.heads == [] and empty.relations == []


def test_write_conll_round_trip(tmp_path):
    data = read_conll(io.StringIO(CONLLX))
    out = io.StringIO()
    write_conll(data.sentences, data.heads, data.relations, out)
    assert out.getvalue() == CONLLX
    for name in ("w.conll", "w.conll.gz"):
        path = tmp_path / name
        write_conll(data.sentences, data.heads, data.relations, path, encoding="latin-1")
        again = read_conll(path, encoding="latin-1")
        assert again.sentences == data.sentences
        assert [h.tolist() for h in again.heads] == [h.tolist() for h in data.heads]
        assert [r.tolist() for r in again.relations] == [r.tolist() for r in data.relations]


def test_write_conll_from_conllu_and_dependency_columns():
    conllu = read_conll(io.StringIO(CONLLU))
    out = io.StringIO()
    write_conll(conllu.sentences, conllu.heads, conllu.relations, out)
    first = out.getvalue().splitlines()[0].split("\t")
    assert first == ["1", "Vamos", "ir", "VERB", "_", "Mood=Imp", "0", "root", "_", "_"]
    columns = read_dependency_columns(io.StringIO(DEPENDENCY_COLUMNS))
    out = io.StringIO()
    write_conll(columns.sentences, columns.heads, None, out)
    again = read_conll(io.StringIO(out.getvalue()))
    assert [t["form"] for t in again.sentences[0]] == ["Dogs", "bark", "."]
    assert [t["postag"] for t in again.sentences[0]] == ["NNS", "VBP", "."]
    assert again.relations[0].tolist() == ["_", "_", "_"]
    assert [h.tolist() for h in again.heads] == [[2, 0, 2], [0]]


def test_write_conll_errors():
    tokens = [[{"form": "a"}, {"form": "b"}]]
    out = io.StringIO()
    with pytest.raises(ValueError, match="same length"):
        write_conll(tokens, [[2, 0], [0]], None, out)
    with pytest.raises(ValueError, match="same length"):
        write_conll(tokens, [[2, 0]], [], out)
    with pytest.raises(ValueError, match="expected 2 heads"):
        write_conll(tokens, [[0]], None, out)
    with pytest.raises(ValueError, match="expected 2 relations"):
        write_conll(tokens, [[2, 0]], [["x"]], out)
    with pytest.raises(ValueError, match=r"heads must lie in 0..2"):
        write_conll(tokens, [[3, 0]], None, out)
    with pytest.raises(ValueError, match="its own head"):
        write_conll(tokens, [[1, 0]], None, out)
    with pytest.raises(ValueError, match="heads must be integers"):
        write_conll(tokens, [[2.0, 0.0]], None, out)
    with pytest.raises(ValueError, match="empty"):
        write_conll([[]], [[]], None, out)
    with pytest.raises(ValueError, match="cannot be written"):
        write_conll([[{"form": "a\tb"}]], [[0]], None, out)
    with pytest.raises(ValueError, match="cannot be written"):
        write_conll([[{"form": ""}]], [[0]], None, out)
    with pytest.raises(TypeError, match="must be a str"):
        write_conll([[{"form": 3}]], [[0]], None, out)
    with pytest.raises(TypeError, match="tokens must be dicts"):
        write_conll([["a"]], [[0]], None, out)
    with pytest.raises(TypeError, match="must be a str"):
        write_conll(tokens, [[2, 0]], [[True, False]], out)
    assert out.getvalue() == ""  # nothing written by a failed call


def test_write_conll_writes_integer_relations_as_digits():
    """A DependencyParser fitted on integer relations predicts integers; they are written
    as their digits (and read back as str, as every CoNLL field)."""
    tokens = [[{"form": "a"}, {"form": "b"}]]
    out = io.StringIO()
    write_conll(tokens, [[2, 0]], [np.array([3, 0])], out)
    assert read_conll(io.StringIO(out.getvalue())).relations[0].tolist() == ["3", "0"]


def test_readers_drop_a_byte_order_mark_and_read_unsuffixed_gzip(tmp_path):
    """Files written with a byte-order mark (Windows tools) read as without it, through a
    path, a gzip file whose name lacks ".gz", or an open file."""
    for reader, text in [(read_conll, CONLLX), (read_dependency_columns, DEPENDENCY_COLUMNS),
                         (read_ptb_trees, PTB)]:
        expected = reader(io.StringIO(text))
        plain, packed = tmp_path / "marked.txt", tmp_path / "packed.txt"
        plain.write_bytes(("\ufeff" + text).encode("utf-8"))
        packed.write_bytes(gzip.compress(text.encode("utf-8")))
        with open(plain, encoding="utf-8") as handle:
            for got in (reader(plain), reader(packed), reader(handle)):
                if reader is read_ptb_trees:
                    assert got == expected
                else:
                    assert got.sentences == expected.sentences
                    assert [h.tolist() for h in got.heads] == \
                        [h.tolist() for h in expected.heads]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_readers_read_a_pipe_whole(tmp_path):
    """A path that is a pipe (``/dev/stdin``, ``<(...)``) is read once, from its start: the
    check for gzip's magic bytes must not consume it."""
    import threading

    for reader, text in [(read_conll, CONLLX), (read_dependency_columns, DEPENDENCY_COLUMNS),
                         (read_ptb_trees, PTB)]:
        expected = reader(io.StringIO(text))
        fifo = tmp_path / f"{reader.__name__}.fifo"
        os.mkfifo(fifo)
        result = {}
        thread = threading.Thread(
            target=lambda reader=reader, fifo=fifo: result.update(got=reader(str(fifo))),
            daemon=True)
        thread.start()
        with open(fifo, "w", encoding="utf-8") as f:  # (waits for the reader to open it)
            f.write(text)
        thread.join(timeout=10)
        if thread.is_alive():  # the reader opened the pipe again: let that open return
            open(fifo, "w").close()
            thread.join(timeout=10)
        got = result["got"]
        if reader is read_ptb_trees:
            assert got == expected
        else:
            assert got.sentences == expected.sentences


def test_readers_refuse_a_truncated_gzip_file_clearly(tmp_path):
    whole = gzip.compress((CONLLX * 400).encode("utf-8"))
    for name in ("cut.conll.gz", "cut.conll"):
        (tmp_path / name).write_bytes(whole[:len(whole) // 2])
        with pytest.raises(ValueError, match="gzip file is not complete"):
            read_conll(tmp_path / name)


def test_read_dependency_columns_inline_and_errors():
    data = read_dependency_columns(io.StringIO(DEPENDENCY_COLUMNS))
    assert data.sentences == [[{"form": "Dogs", "postag": "NNS"},
                               {"form": "bark", "postag": "VBP"},
                               {"form": ".", "postag": "."}],
                              [{"form": "Yes", "postag": "UH"}]]
    assert [h.tolist() for h in data.heads] == [[2, 0, 2], [0]]
    for text, message in [
        ("a\tDT\n", "line 1: expected 3 tab-separated columns"),
        ("a\tDT\t0\tx\n", "line 1: expected 3 tab-separated columns"),
        ("a\tDT\t0\n\nb\tNN\troot\n", "line 3: the head 'root' is not an integer"),
        ("a\tDT\t0\nb\tNN\t5\n", r"line 2: head 5 is outside 0..2"),
    ]:
        with pytest.raises(ValueError, match=message):
            read_dependency_columns(io.StringIO(text))


# --------------------------------------------------------------------- bracketed trees
def test_read_ptb_trees_inline():
    trees = read_ptb_trees(io.StringIO(PTB))
    assert [tree_to_string(t) for t in trees] == PTB_CLEAN
    raw = read_ptb_trees(io.StringIO(PTB), remove_empty=False, strip_function_tags=False)
    assert raw[0][0] == "S" and raw[0][1][0] == "NP-SBJ-1"
    assert "(PP-LOC=2 (IN in)" in tree_to_string(raw[0])
    assert tree_words(raw[0]).count("*-1") == 1
    assert tree_tags(raw[1]).count("-NONE-") == 3
    # function tags stripped, traces kept
    kept = read_ptb_trees(io.StringIO(PTB), remove_empty=True, strip_function_tags=False)
    assert tree_to_string(kept[1]).startswith("(SINV (S-TPC-3 (VP (VBZ Hi)))")
    stripped = read_ptb_trees(io.StringIO(PTB), remove_empty=False)
    assert "(NP (-NONE- *-1))" in tree_to_string(stripped[0])
    assert tree_tags(trees[0]) == ["DT", "NN", "VBD", "VBN", "IN", "NNP", "-LRB-", "NNP",
                                   "-RRB-", "."]


def test_read_ptb_trees_errors():
    for text, message in [
        ("( (S (NP (DT a)) )", r"line 1: unbalanced '\('"),
        ("(S (NP (DT a))))", r"line 1: unbalanced '\)'"),
        ("(S\n (NP (DT a) b))", "line 2: a word must be the only child"),
        ("(S (NP (DT a b)))", "line 1: a word must be the only child"),
        ("(S (NP ))", "line 1: empty bracket"),
        ("(S ())", "line 1: empty bracket"),
        ("(S (NN a))\nword", r"line 2: 'word' outside brackets"),
        ("(S (NN a))\n( (S (-NONE- *)))", "line 2: the tree holds only -NONE-"),
    ]:
        with pytest.raises(ValueError, match=message):
            read_ptb_trees(io.StringIO(text))


@pytest.mark.parametrize("string", TREES + PTB_CLEAN)
def test_tree_string_round_trip(string):
    tree = tree_from_string(string)
    assert tree_to_string(tree) == string
    assert tree_from_string(tree_to_string(tree)) == tree
    assert read_ptb_trees(io.StringIO(string)) == [tree]  # clean trees read the same


def test_tree_from_string_keeps_what_is_written():
    tree = tree_from_string("( (S (NP-SBJ (-NONE- *)) (VP (VB go))) )")
    assert tree == ("", ("S", ("NP-SBJ", ("-NONE-", "*")), ("VP", ("VB", "go"))))
    assert tree_to_string(tree) == "( (S (NP-SBJ (-NONE- *)) (VP (VB go))))"
    for text in ["", "(NN a) (NN b)", "(NN a"]:
        with pytest.raises(ValueError):
            tree_from_string(text)
    with pytest.raises(TypeError):
        tree_from_string(b"(NN a)")


def test_tree_to_string_refuses_unwritable_trees():
    for tree in [("NN", "a b"), ("NN", "a)"), ("N N", "a"), ("", "a"), ("NN", "")]:
        with pytest.raises(ValueError):
            tree_to_string(tree)


def test_tree_validation():
    for bad, error in [
        ("S", TypeError),
        (["S", ["NN", "a"]], TypeError),
        (("S",), ValueError),
        (("S", ("NN", "a"), "b"), ValueError),
        (("S", ("NN", "a", "b")), ValueError),
        ((1, ("NN", "a")), TypeError),
        (("S", ("NN", 3)), TypeError),
    ]:
        for function in (tree_words, tree_tags, labelled_spans, tree_to_string, binarize,
                         unbinarize, collapse_unary, expand_unary):
            with pytest.raises(error):
                function(bad)


def test_words_tags_and_spans():
    tree = tree_from_string(TREES[3])
    assert tree_words(tree) == ["John", ",", "a", "friend", "'s", "dog", ",", "x", "y"]
    assert tree_tags(tree)[:3] == ["NNP", ",", "DT"]
    spans = labelled_spans(tree)
    assert spans == {("NP", 0, 9): 1, ("NP", 0, 1): 1, ("NP", 2, 6): 1}
    # a unary chain of one label over one span counts once per node; the root counts
    spans = labelled_spans(tree_from_string("(S (NP (NP (DT the) (NN man))) (VP (VBD ran)))"))
    assert spans == {("S", 0, 3): 1, ("NP", 0, 2): 2, ("VP", 2, 3): 1}
    assert labelled_spans(("NN", "Hi")) == {}  # preterminals are not counted


# -------------------------------------------------------------------------- transforms
def _max_children(tree):
    if isinstance(tree[1], str):
        return 1
    return max(len(tree) - 1, *(_max_children(c) for c in tree[1:]))


def test_binarize_labels():
    tree = tree_from_string(TREES[0])
    assert tree_to_string(binarize(tree)) == (
        "(S (NP (DT the) (@NP|<DT> (JJ big) (@NP|<DT-JJ> (JJ red) (NN dog)))) "
        "(@S|<NP> (VP (VBZ barks) (ADVP (RB loudly))) (. .)))")
    assert tree_to_string(binarize(tree, horizontal=0)) == (
        "(S (NP (DT the) (@NP|<> (JJ big) (@NP|<> (JJ red) (NN dog)))) "
        "(@S|<> (VP (VBZ barks) (ADVP (RB loudly))) (. .)))")
    assert tree_to_string(binarize(tree, horizontal=1, vertical=2)) == (
        "(S (NP^S (DT the) (@NP^S|<DT> (JJ big) (@NP^S|<JJ> (JJ red) (NN dog)))) "
        "(@S|<NP> (VP^S (VBZ barks) (ADVP^VP (RB loudly))) (. .)))")
    assert tree_to_string(binarize(tree, horizontal=2, vertical=3)) == (
        "(S (NP^S (DT the) (@NP^S|<DT> (JJ big) (@NP^S|<DT-JJ> (JJ red) (NN dog)))) "
        "(@S|<NP> (VP^S (VBZ barks) (ADVP^VP^S (RB loudly))) (. .)))")


def test_binarize_refuses_reserved_labels_and_bad_orders():
    for label in ("@NP", "NP^S"):
        with pytest.raises(ValueError, match="reserves"):
            binarize((label, ("NN", "a"), ("NN", "b")))
    binarize(("S", ("@X", "a"), ("NN^", "b")))  # tags are not annotated: no clash
    for kwargs in ({"horizontal": -1}, {"horizontal": 1.5}, {"horizontal": True},
                   {"vertical": 0}, {"vertical": None}, {"vertical": "2"}):
        with pytest.raises(ValueError):
            binarize(("NN", "a"), **kwargs)
    with pytest.raises(ValueError, match="intermediate"):
        unbinarize(("@NP|<>", ("NN", "a"), ("NN", "b")))


MARKOVISATIONS = [(None, 1), (0, 1), (1, 1), (2, 1), (None, 2), (0, 2), (1, 2), (2, 3),
                  (None, 3)]


@pytest.mark.parametrize("horizontal, vertical", MARKOVISATIONS)
def test_binarize_unbinarize_inverse(horizontal, vertical):
    rng = np.random.default_rng(0)
    trees = [tree_from_string(s) for s in TREES + PTB_CLEAN]
    trees += [random_tree(rng, [f"w{i}" for i in range(n)], ["S", "NP", "VP", "ADVP|PRT"],
                          ["NN", "-LRB-", "."], max_children=6)
              for n in rng.integers(1, 15, size=40)]
    for tree in trees:
        binarized = binarize(tree, horizontal=horizontal, vertical=vertical)
        assert _max_children(binarized) <= 2
        assert tree_words(binarized) == tree_words(tree)
        assert tree_tags(binarized) == tree_tags(tree)
        assert unbinarize(binarized) == tree
        assert tree_from_string(tree_to_string(binarized)) == binarized


def test_collapse_expand_unary():
    tree = tree_from_string("(S (NP (PRP it)) (VP (VP (VBZ works))) (S (VP (VB Go))))")
    collapsed = collapse_unary(tree)
    assert tree_to_string(collapsed) == "(S (NP+PRP it) (VP+VP+VBZ works) (S+VP+VB Go))"
    assert expand_unary(collapsed) == tree
    assert tree_to_string(collapse_unary(("S", ("VP", ("VB", "Go"))))) == "(S+VP+VB Go)"
    assert collapse_unary(tree, join="~")[1] == ("NP~PRP", "it")
    assert expand_unary(collapse_unary(tree, join="::"), join="::") == tree
    with pytest.raises(ValueError, match="separator"):
        collapse_unary(("NP+X", ("NN", "a"), ("NN", "b")))
    with pytest.raises(ValueError, match="separator"):
        collapse_unary(("NP", ("NN+", "a"), ("NN", "b")))
    with pytest.raises(ValueError, match="join"):
        collapse_unary(tree, join="")
    rng = np.random.default_rng(1)
    for n in rng.integers(1, 12, size=60):
        tree = random_tree(rng, [f"w{i}" for i in range(n)], ["S", "NP", "VP"], ["NN", "DT"])
        collapsed = collapse_unary(tree)
        assert tree_words(collapsed) == tree_words(tree)
        assert expand_unary(collapsed) == tree
        # no unary phrasal node is left
        stack = [collapsed]
        while stack:
            node = stack.pop()
            if not isinstance(node[1], str):
                assert len(node) > 2
                stack.extend(node[1:])


@pytest.mark.parametrize("horizontal, vertical", [(None, 1), (1, 2)])
def test_binarize_and_collapse_compose(horizontal, vertical):
    rng = np.random.default_rng(2)
    for n in rng.integers(1, 12, size=40):
        tree = random_tree(rng, [f"w{i}" for i in range(n)], ["S", "NP", "VP"], ["NN", "DT"],
                           max_children=5)
        one = collapse_unary(binarize(tree, horizontal, vertical))
        assert unbinarize(expand_unary(one)) == tree
        two = binarize(collapse_unary(tree), horizontal, vertical)
        assert expand_unary(unbinarize(two)) == tree


def test_nltk_conversion():
    nltk = pytest.importorskip("nltk")
    for string in TREES + PTB_CLEAN:
        tree = tree_from_string(string)
        converted = to_nltk(tree)
        assert isinstance(converted, nltk.Tree)
        assert converted == nltk.Tree.fromstring(string)
        assert converted.leaves() == tree_words(tree)
        assert from_nltk(converted) == tree
    with pytest.raises(TypeError):
        from_nltk(("S", ("NN", "a")))
    with pytest.raises(TypeError):
        from_nltk(nltk.Tree("S", [nltk.Tree("NN", [("a", "DT")])]))
    with pytest.raises(ValueError):
        from_nltk(nltk.Tree("S", [nltk.Tree("NN", ["a", "b"])]))


# ------------------------------------------------------------------------- real treebanks
@functools.lru_cache(maxsize=1)
def _read_ptb_sample(data_home):
    directory = os.path.join(data_home, "ptb_sample")
    return (read_ptb_trees(os.path.join(directory, "treebank.mrg.gz")),
            read_dependency_columns(os.path.join(directory, "dependency.dp.gz")))


@pytest.fixture
def ptb(data_home):
    """The PTB sample's trees and its dependency version, read once for the module."""
    return _read_ptb_sample(data_home)


def test_conll2007_basque(data_home, tmp_path):
    directory = os.path.join(data_home, "conll2007_eus")
    for split, n_sentences, n_tokens in [("train", 2595, 40032), ("test", 580, 10096)]:
        data = read_conll(os.path.join(directory, f"eus.{split}.gz"), encoding="latin-1")
        assert data.format == "conllx"
        assert len(data.sentences) == len(data.heads) == len(data.relations) == n_sentences
        assert sum(len(s) for s in data.sentences) == n_tokens
        assert sum(len(h) for h in data.heads) == n_tokens
        assert sum(int((h == 0).sum()) for h in data.heads) >= n_sentences
    assert data.sentences[0][0]["form"] != ""
    train = read_conll(os.path.join(directory, "eus.train.gz"), encoding="latin-1")
    first = train.sentences[0]
    assert first[0] == {"form": "josu_jon_imaz", "lemma": "Josu_Jon_Imaz", "cpostag": "IZE",
                        "postag": "IZE_IZB", "feats": "PLU-|ENTI_PER"}
    assert train.heads[0][:3].tolist() == [8, 3, 5] and train.relations[0][11] == "ROOT"
    # Latin-1 letters decoded
    assert any("ñ" in t["form"] for s in train.sentences for t in s)
    path = tmp_path / "eus.train.conll.gz"
    write_conll(train.sentences, train.heads, train.relations, path)
    again = read_conll(path)
    assert again.sentences == train.sentences
    assert all(np.array_equal(a, b) for a, b in zip(again.heads, train.heads))
    assert all(np.array_equal(a, b) for a, b in zip(again.relations, train.relations))


def test_ptb_sample_counts_and_dependency_words(ptb):
    trees, dependencies = ptb
    assert len(trees) == 3914
    assert sum(len(tree_words(t)) for t in trees) == 94084
    assert len(dependencies.sentences) == len(dependencies.heads) == 3914
    assert sum(len(h) for h in dependencies.heads) == 94084
    # the dependency file has the trees' words with the traces removed, sentence by sentence
    for tree, tokens in zip(trees, dependencies.sentences):
        assert tree_words(tree) == [t["form"] for t in tokens]
        assert tree_tags(tree) == [t["postag"] for t in tokens]
    labels = {label for t in trees for (label, _, _) in labelled_spans(t)}
    assert {"S", "NP", "VP", "PP", "SBAR", "ADVP|PRT"} <= labels
    assert not any("-" in label or "=" in label for label in labels)
    assert {t[0] for t in trees} >= {"S", "SINV", "FRAG"}  # no outer bracket left


def test_ptb_sample_round_trips(ptb, data_home):
    trees, _ = ptb
    for tree in trees:
        assert tree_from_string(tree_to_string(tree)) == tree
        assert expand_unary(collapse_unary(tree)) == tree
    for horizontal, vertical in [(None, 1), (1, 2), (2, 3)]:
        for tree in trees:
            assert unbinarize(binarize(tree, horizontal, vertical)) == tree
    raw = read_ptb_trees(os.path.join(data_home, "ptb_sample", "treebank.mrg.gz"),
                         remove_empty=False, strip_function_tags=False)
    assert sum(tree_tags(t).count("-NONE-") for t in raw) == 6592
    assert sum(len(tree_words(t)) for t in raw) == 94084 + 6592


def test_ptb_sample_matches_nltk(data_home):
    # nltk's reader on the first 1,000 trees (every tree of the file starts a line with "(")
    nltk = pytest.importorskip("nltk")
    path = os.path.join(data_home, "ptb_sample", "treebank.mrg.gz")
    with gzip.open(path, "rt") as f:
        lines = f.read().splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("(")]
    assert len(starts) == 3914
    text = "".join(lines[:starts[1000]])
    document = nltk.Tree.fromstring("(DOC " + text + ")")
    raw = read_ptb_trees(io.StringIO(text), remove_empty=False, strip_function_tags=False)
    assert len(document) == len(raw) == 1000
    for outer, tree in zip(document, raw):
        assert outer.label() == "" and len(outer) == 1
        assert from_nltk(outer[0]) == tree
