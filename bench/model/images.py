"""Generates receipt-like PNG images with PIL: a shop name, a date, 8 to 14
items with prices, a total. Deterministic (seeded)."""

import random
import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

SHOPS = ["CORNER GROCERY", "BLUE DOOR CAFE", "HARDWARE PLUS", "FRESH MARKET", "BOOK NOOK"]
ITEMS = ["Milk 1L", "Bread", "Coffee beans", "Eggs x12", "Apples", "Butter", "Cheese",
         "Tomatoes", "Rice 2kg", "Olive oil", "Pasta", "Yogurt", "Tea box", "Bananas",
         "Screws M4", "Tape", "Batteries AA", "Notebook", "Pen set", "Orange juice"]


def receipt(rng, font, small):
    items = rng.sample(ITEMS, rng.randint(8, 14))
    height = 140 + 34 * len(items) + 90
    img = Image.new("RGB", (520, height), "white")
    draw = ImageDraw.Draw(img)
    draw.text((30, 20), rng.choice(SHOPS), fill="black", font=font)
    draw.text((30, 60), f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}  "
              f"{rng.randint(8, 21):02d}:{rng.randint(0, 59):02d}", fill="black", font=small)
    y = 110
    total = 0.0
    for item in items:
        price = rng.randint(50, 2500) / 100
        total += price
        draw.text((30, y), item, fill="black", font=small)
        draw.text((380, y), f"{price:7.2f}", fill="black", font=small)
        y += 34
    draw.line((30, y + 8, 490, y + 8), fill="black", width=2)
    draw.text((30, y + 24), "TOTAL", fill="black", font=font)
    draw.text((360, y + 24), f"{total:8.2f}", fill="black", font=font)
    return img


def main(out, count):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(18)
    sans = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    mono = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
    try:
        font, small = ImageFont.truetype(sans, 28), ImageFont.truetype(mono, 22)
    except OSError:
        font, small = ImageFont.load_default(size=28), ImageFont.load_default(size=22)
    for i in range(count):
        receipt(rng, font, small).save(out / f"receipt-{i:02d}.png")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
