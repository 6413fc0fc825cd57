from sklstruct import M3NSimplicialDecomposition
from sklstruct.datasets import load_conll2000
from sklstruct.metrics import chunk_f1_score
from sklstruct.preprocessing import SequenceVectorizer, window_features

train = load_conll2000(subset="train")   # downloaded to ~/sklstruct_data the first time
test = load_conll2000(subset="test")
vectorizer = SequenceVectorizer()
X_train = vectorizer.fit_transform(
    [window_features(words, pos) for words, pos in zip(train.words, train.pos)])
X_test = vectorizer.transform(
    [window_features(words, pos) for words, pos in zip(test.words, test.pos)])

model = M3NSimplicialDecomposition(C=0.1).fit(X_train, train.target)
print(f"chunk F1: {chunk_f1_score(test.target, model.predict(X_test)):.4f}")
