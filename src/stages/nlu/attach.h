/* attach.h — does a customer's message refer to what it came with (a photo, a scan, a voice
 * message)? Decides whether the OCR text of an attached image joins the message for NLU.
 *
 * Design: a rule over word classes, not phrases. The message is lowered (ASCII) and split into
 * words; it refers to the attachment when
 *   (a) a deictic or attachment word ("this", "these", "that", "those", "here", "attached",
 *       "enclosed", "uploaded", "following", "above", "below") is followed, within three words,
 *       by a document or media noun (invoice, bill, receipt, statement, document, file, photo,
 *       picture, image, screenshot, scan, page, letter, form, recording, voice message, ...), or
 *   (b) it names the act of attaching or looking / listening ("attached", "attaching",
 *       "enclosed", "see the picture", "look at", "listen", "hear"), or
 *   (c) a preposition puts something on the medium ("on the invoice", "in the photo"), or
 *   (d) Chinese: 这张 / 这个 / 这份 / 附件 / 附上 / 图片 / 照片 / 截图 / 发票 / 收据 / 录音 / 听.
 * Plural 's' is accepted on the nouns. Thread safety: pure function.
 */
#ifndef FRUGAL_NLU_ATTACH_H
#define FRUGAL_NLU_ATTACH_H

#include <stdbool.h>
#include <stddef.h>

/* true when text[0..len) refers to an attachment (rules above). Any bytes. */
bool fr_nlu_refers_to_attachment(const char *text, size_t len);

#endif
