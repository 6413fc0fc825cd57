"""Descriptions (``DESCR``) of the data sets returned by the loaders."""

OCR_LETTERS = """\
.. _ocr_letters_dataset:

OCR handwritten letters (Kassel / Taskar)
-----------------------------------------

Handwritten words collected by Rob Kassel (MIT Spoken Language Systems Group),
rasterised and normalised by Ben Taskar for the max-margin Markov network
experiments. The first (capital) letter of every word was removed by the
authors of the data set, so words read "ommanding", "ommanding", ...

**Data set characteristics:**

=================  ==========================================
Words              6,877 (3 to 14 letters, mean 7.58)
Letters            52,152
Classes            26 (lower-case letters 'a' to 'z')
Features           128 binary pixels per letter (16 x 8 image,
                   row-major: ``data[i][t].reshape(16, 8)``)
Folds              10 (``folds``), about 690 words each
=================  ==========================================

The usual small-training-set protocol trains on one fold and tests on the
other nine (fold 1 for training: 704 words, 5,375 letters).

References
----------
B. Taskar, C. Guestrin and D. Koller, "Max-Margin Markov Networks", NIPS 2003.
"""

OCR_SAMPLE = """\
.. _ocr_sample_dataset:

OCR handwritten letters, embedded sample
----------------------------------------

A small sample of the OCR handwritten letters data set (see
``load_ocr_letters``), shipped with sklstruct so that examples and tests run
without external data: 150 words of fold 0 and 150 words of fold 1, chosen
with a fixed random seed and kept in their original order.

**Data set characteristics:**

=================  ==========================================
Words              300 (150 in fold 0, 150 in fold 1)
Classes            26 (lower-case letters 'a' to 'z')
Features           128 binary pixels per letter (16 x 8 image)
Folds              0 and 1 (``folds``)
=================  ==========================================

Train on one fold and test on the other.
"""

CONLL2000 = """\
.. _conll2000_dataset:

CoNLL-2000 text chunking
------------------------

Wall Street Journal text (Penn Treebank sections 15-18 for training and
section 20 for testing) with part-of-speech tags from the Brill tagger and
chunk tags in the IOB2 scheme (``B-NP``, ``I-NP``, ..., ``O``).

**Data set characteristics:**

=================  ==========================================
Train              8,936 sentences, 211,727 tokens
Test               2,012 sentences, 47,377 tokens
Chunk tags         22 in train, 23 over both splits
=================  ==========================================

Some chunk tags occur in only one split (``I-LST`` only in test), so a model
must accept test labels never seen in training.

References
----------
E. F. Tjong Kim Sang and S. Buchholz, "Introduction to the CoNLL-2000 Shared
Task: Chunking", CoNLL 2000.
"""

CONLL2002 = """\
.. _conll2002_dataset:

CoNLL-2002 named entity recognition
-----------------------------------

News text with part-of-speech tags and named-entity tags in the IOB2 scheme
over PER, LOC, ORG and MISC (9 tags). ``testa`` is the development set and
``testb`` the test set. The data may only be used for research.

**Data set characteristics (Spanish):**

=================  ==========================================
train              8,323 sentences, 264,715 tokens
testa              1,915 sentences, 52,923 tokens
testb              1,517 sentences, 51,533 tokens
=================  ==========================================

References
----------
E. F. Tjong Kim Sang, "Introduction to the CoNLL-2002 Shared Task:
Language-Independent Named Entity Recognition", CoNLL 2002.
"""
