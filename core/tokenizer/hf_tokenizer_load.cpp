// Reading tokenizer.json and tokenizer_config.json into an HfTokenizer: each
// part of the file goes to the piece that owns it, in the order below, and
// whatever is neither byte-level nor SentencePiece-style BPE is refused naming
// the file and the key.
#include "core/tokenizer/hf_tokenizer.h"

#include "core/io/read_file.h"
#include "core/tokenizer/hf_tokenizer_impl.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/fingerprint.h"

namespace ptrain::tokenizer {

using nlohmann::json;

namespace {

json parse_json(const std::string& text, const std::filesystem::path& path) {
  try {
    return json::parse(text);
  } catch (const json::exception& error) {  // parse_error, or out_of_range for a number past a double
    throw sdk::ConfigError(path.string() + ": not valid JSON: " + error.what());
  }
}

std::string fingerprint_of(const std::string& tokenizer_text, const std::string& config_text) {
  return "hf:" + sdk::hex64(sdk::fnv1a(tokenizer_text)) + ":" + sdk::hex64(sdk::fnv1a(config_text));
}

// Byte-level BPE decodes with ByteLevel (or no decoder, which means the same
// for it); the SentencePiece-style model with the other steps.
void check_decoder(const detail::Decoder& decoder, bool byte_level_model, const detail::JsonSource& file) {
  if (byte_level_model && !decoder.empty() && !decoder.byte_level())
    file.fail("key 'decoder': a byte-level BPE file (ByteLevel pre-tokenizer) must decode with ByteLevel");
  if (!byte_level_model && decoder.byte_level()) {
    file.fail(
        "key 'decoder': decoder 'ByteLevel' needs a ByteLevel pre-tokenizer (key 'pre_tokenizer'), which this file "
        "has not");
  }
}

}  // namespace

std::unique_ptr<HfTokenizer> HfTokenizer::load(const std::filesystem::path& tokenizer_json) {
  const std::optional<std::string> text = io::try_read_file(tokenizer_json);
  if (!text) {
    throw sdk::ConfigError(tokenizer_json.string() + ": cannot read tokenizer file (" +
                           (std::filesystem::exists(tokenizer_json) ? "not a readable file" : "no such file") + ")");
  }
  const json tokenizer = parse_json(*text, tokenizer_json);
  const std::filesystem::path config_path = tokenizer_json.parent_path() / "tokenizer_config.json";
  const std::optional<std::string> config_text = io::try_read_file(config_path);
  const json config = config_text ? parse_json(*config_text, config_path) : json();
  return build(tokenizer, config, tokenizer_json.string(), fingerprint_of(*text, config_text.value_or("")));
}

std::unique_ptr<HfTokenizer> HfTokenizer::from_json(const json& tokenizer, const json& config,
                                                    const std::string& source) {
  return build(tokenizer, config, source, fingerprint_of(tokenizer.dump(), config.dump()));
}

// A function-try-block: the loaders check the keys they know, and a value of
// an unexpected JSON type anywhere else still ends as this file's ConfigError.
std::unique_ptr<HfTokenizer> HfTokenizer::build(const json& tokenizer, const json& config, const std::string& source,
                                                std::string fingerprint) try {
  const detail::JsonSource file{source};
  if (!tokenizer.is_object())
    file.fail("expected a JSON object (a Hugging Face tokenizer.json), got " + detail::json_type(tokenizer));
  if (!tokenizer.contains("model")) file.fail("missing key 'model' (is this a Hugging Face tokenizer.json?)");
  auto impl = std::make_unique<Impl>();
  impl->normalizer = detail::Normalizer::load(tokenizer.value("normalizer", json()), file);
  impl->pre_tokenizer = detail::PreTokenizer::load(tokenizer.value("pre_tokenizer", json()), file);
  // A ByteLevel step makes it byte-level BPE; without one, SentencePiece-style BPE.
  const bool byte_level = impl->pre_tokenizer.has_byte_level();
  if (byte_level && impl->pre_tokenizer.metaspace())
    file.fail("key 'pre_tokenizer': Metaspace and ByteLevel steps together are not supported");
  impl->decoder = detail::Decoder::load(tokenizer.value("decoder", json()), file);
  check_decoder(impl->decoder, byte_level, file);
  impl->model = detail::load_model(tokenizer.at("model"), file, impl->decode_table, byte_level);
  impl->added_tokens =
      detail::AddedTokens::load(tokenizer.value("added_tokens", json()), file, impl->normalizer, impl->decode_table);
  // Special tokens are named by their text: an added token's content first, else a vocabulary token's bytes.
  const Impl& parts = *impl;
  impl->config = detail::read_tokenizer_config(config, file, [&parts](const std::string& text) {
    const auto added = parts.added_tokens.id_of(text);
    return added ? added : parts.model->token_id(text);
  });
  impl->config_path = (std::filesystem::path(source).parent_path() / "tokenizer_config.json").string();
  if (impl->config.pad < 0)
    impl->config.pad = impl->config.eos;  // what TRL does for models without a pad token; padding is never trained on
  impl->fingerprint = std::move(fingerprint);
  return std::unique_ptr<HfTokenizer>(new HfTokenizer(std::move(impl)));
} catch (const json::exception& error) {
  throw sdk::ConfigError(source + ": unexpected value in tokenizer.json: " + error.what());
}

}  // namespace ptrain::tokenizer
