/**
 * The service's icon, served at `/favicon.ico` (the hosted page links it; browsers ask for it anyway): a 32x32
 * icon of a payment card, white on the page's blue, drawn here as an ICO file holding one 32-bit bitmap, so the
 * service ships no binary file (it runs from compiled output, dist/, which holds only modules and migrations).
 */
const SIZE = 32
const BLUE = [0xd8, 0x4e, 0x1d, 0xff] // #1d4ed8 as BGRA
const WHITE = [0xff, 0xff, 0xff, 0xff]
const CLEAR = [0, 0, 0, 0]

/** The colour of pixel (x, y), y from the top: a rounded blue square with a white card outline and stripe. */
function pixel(x: number, y: number): number[] {
  const r = 6
  const cx = Math.min(Math.max(x, r), SIZE - 1 - r)
  const cy = Math.min(Math.max(y, r), SIZE - 1 - r)
  if ((x - cx) ** 2 + (y - cy) ** 2 > r * r) return CLEAR
  const inCard = x >= 6 && x <= 25 && y >= 9 && y <= 22
  const edge = inCard && (x <= 7 || x >= 24 || y <= 10 || y >= 21)
  const stripe = inCard && y >= 13 && y <= 15
  const chip = x >= 10 && x <= 14 && y >= 17 && y <= 18
  return edge || stripe || chip ? WHITE : BLUE
}

function buildIcon(): Buffer {
  const pixels = Buffer.alloc(SIZE * SIZE * 4)
  // Bitmap rows run bottom-up.
  for (let y = 0; y < SIZE; y++) {
    for (let x = 0; x < SIZE; x++) pixels.set(pixel(x, SIZE - 1 - y), (y * SIZE + x) * 4)
  }
  const mask = Buffer.alloc((SIZE / 8) * SIZE) // all 0: the alpha channel decides
  const info = Buffer.alloc(40)
  info.writeUInt32LE(40, 0) // header size
  info.writeInt32LE(SIZE, 4)
  info.writeInt32LE(SIZE * 2, 8) // height of the colour bitmap and the mask together
  info.writeUInt16LE(1, 12) // planes
  info.writeUInt16LE(32, 14) // bits per pixel
  info.writeUInt32LE(pixels.length + mask.length, 20)
  const image = Buffer.concat([info, pixels, mask])
  const header = Buffer.alloc(6 + 16)
  header.writeUInt16LE(0, 0)
  header.writeUInt16LE(1, 2) // an icon
  header.writeUInt16LE(1, 4) // one image
  header.writeUInt8(SIZE, 6)
  header.writeUInt8(SIZE, 7)
  header.writeUInt8(0, 8) // no palette
  header.writeUInt16LE(1, 10) // planes
  header.writeUInt16LE(32, 12) // bits per pixel
  header.writeUInt32LE(image.length, 14)
  header.writeUInt32LE(header.length, 18)
  return Buffer.concat([header, image])
}

export const FAVICON_PATH = '/favicon.ico'
export const FAVICON: Buffer = buildIcon()
