"""The text layer: sentences, Lead-k, trigram blocking, oracles and ROUGE, paragraph rankers, entities, evaluation of
summary files, Rotowire records, content plans and table-to-text metrics. Plain Python over strings: it imports no
model code, so every other part can use it."""
