"""hf_perplexity.py run inside the llmcompressor toolchain.

    python llmc_perplexity.py --model DIR --text eval.txt [--ctx 512] [--chunks N]

A compressed-tensors checkpoint loads only where compressed-tensors and the
transformers it pins are installed, so the converted model is scored here; the
scoring itself is hf_perplexity.py's (same folder), byte for byte the scheme of the
baseline, so the two numbers compare.
"""

import sys

from hf_perplexity import main

if __name__ == "__main__":
    sys.exit(main())
