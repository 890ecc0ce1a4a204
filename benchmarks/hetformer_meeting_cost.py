"""Time and peak memory of the HetFormer pipeline on one long meeting, step by step: reading and segmenting the
transcript (`processor.documents`: markup, meeting units), named entities (spaCy, in the units that fit), tokenizing
into the node sequence, the model's forward pass and choosing the summary. The issue's target (#62): a 25,000-word
meeting within 2 minutes and 3 GB on 2 CPU cores.

    # the longest QMSum development meeting (validation row 2, Bed015: 24,573 words)
    python benchmarks/hetformer_meeting_cost.py --row 2 --threads 2

Prints one JSON object: words, units read and kept, tokens, seconds per step and in all, and the process's peak
resident set (VmHWM, MiB: Python, libraries and weights included).
"""

import argparse
import json
import time
import warnings

from _common import proc_status_mib, setup_runtime


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="checkpoints/hetformer-minilm-qmsum")
    parser.add_argument("--data_file", default=None, help="JSONL with a `document` (default: QMSum validation).")
    parser.add_argument("--row", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max_length", type=int, default=None, help="Tokens read (default: the model's limit).")
    parser.add_argument("--segmentation", choices=("meeting", "sentences"), default="meeting",
                        help="sentences: read the transcript as prose sentences (the package before #62).")
    args = parser.parse_args()
    setup_runtime(args.threads)
    from sumformers.hub import load_pipeline
    from sumformers.processing.processing_hetformer import encode_documents
    from sumformers.text.evaluation import data_dir, read_jsonl

    data_file = args.data_file or data_dir() / "qmsum" / "validation.jsonl"
    example = read_jsonl(data_file)[args.row]
    warnings.simplefilter("ignore")
    summarizer = load_pipeline(args.model)
    processor, config = summarizer.model_processor, summarizer.model.config
    config.meeting_segmentation = "auto" if args.segmentation == "meeting" else "off"
    limit = processor.token_limit(args.max_length)
    seconds = {}

    def step(name, function, *arguments):
        start = time.perf_counter()
        result = function(*arguments)
        seconds[name] = round(time.perf_counter() - start, 2)
        return result

    loaded_mib = proc_status_mib("VmRSS")
    readable = step("read", summarizer.readable_input, example["document"], args.max_length)
    documents = step("segment", processor.documents, readable)
    mentions = step("entities", processor.entities_in_reach, documents, limit)
    encoded = step("encode", encode_documents, processor.tokenizer, documents, config, limit, mentions, False)
    inputs = {**processor.collate([encoded]), "sentences": tuple(documents[d][s] for d, s in encoded["sentence_ids"]),
              "document_count": len(documents)}
    outputs = step("forward", summarizer.forward, inputs)
    summary = step("select", summarizer.postprocess, outputs)
    print(json.dumps({
        "id": example["id"], "words": len(example["document"].split()), "segmentation": args.segmentation,
        "units": sum(map(len, documents)), "units_read": len(encoded["sentence_ids"]),
        "tokens": len(encoded["input_ids"]), "token_limit": limit, "threads": args.threads,
        "seconds": seconds, "total_seconds": round(sum(seconds.values()), 2),
        "rss_after_load_mib": round(loaded_mib), "peak_rss_mib": round(proc_status_mib("VmHWM")),
        "summary_units": len(summary["sentences"]),
    }))


if __name__ == "__main__":
    main()
