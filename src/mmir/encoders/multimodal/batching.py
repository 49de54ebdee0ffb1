"""DataLoader plumbing of :meth:`MultimodalEncoder.encode_image_bytes`: module-level so it pickles for worker
processes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from PIL import Image

from mmir.data.images import CorruptImage, ImageTooLarge, blank_image, decode_image


class ImageBytesDataset(torch.utils.data.Dataset):
    """Decode + preprocess one image per item; broken images are reported, not raised, inside the worker."""

    def __init__(self, datas: Sequence[bytes], sources: Sequence[str], transform: Callable, max_pixels: int,
                 substitute_blank: bool):
        self.datas, self.sources, self.transform = datas, sources, transform
        self.max_pixels, self.substitute_blank = max_pixels, substitute_blank

    def __len__(self) -> int:
        return len(self.datas)

    def __getitem__(self, i: int):
        try:
            img = decode_image(self.datas[i], source=self.sources[i], max_pixels=self.max_pixels)
            failed = False
        except (CorruptImage, ImageTooLarge):
            # the main process re-raises or counts it (DataError subclasses do not survive worker re-raising)
            if not self.substitute_blank:
                return i, None, True
            img, failed = blank_image(), True
        return i, self.transform(img), failed


class Collate:
    def __init__(self, collate_items: Callable[[list], Any]):
        self.collate_items = collate_items

    def __call__(self, rows):
        idx = [r[0] for r in rows]
        failed = [r[0] for r in rows if r[2]]
        items = [r[1] for r in rows if r[1] is not None]
        kept = [r[0] for r in rows if r[1] is not None]
        return idx, kept, failed, (self.collate_items(items) if items else None)


def identity(img: Image.Image) -> Image.Image:
    return img


def list_collate(items: list) -> list:
    return list(items)


def stack_collate(items: list) -> torch.Tensor:
    return torch.stack(items)


class HFPixelTransform:
    """transformers image processor -> ``pixel_values`` tensor ``(3, H, W)`` of one image."""

    def __init__(self, image_processor: Any):
        self.image_processor = image_processor

    def __call__(self, img: Image.Image) -> torch.Tensor:
        return self.image_processor(images=[img], return_tensors="pt")["pixel_values"][0]
