"""Small source trees for the lint checkers' tests."""
import os


def write_sources(root, files):
    """Writes each {path: text} of `files` under root/src, making directories as needed."""
    for path, text in files.items():
        full = os.path.join(root, "src", path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
