#include "gpusched/sched/cel.h"

#include <algorithm>
#include <array>
#include <forward_list>
#include <initializer_list>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace gpusched::sched::cel {

namespace dra = core::dra;

namespace {

constexpr std::string_view kSubsetNote = " (gpusched evaluates the subset in docs/dra.md)";

// Static types, as far as Compile knows them; attribute values are kDyn (int, bool, string or version).
enum class Type : uint8_t {
  kDyn,
  kBool,
  kInt,
  kString,
  kQuantity,
  kSemver,
  kList,
  kDevice,
  kAttrDomains,  // device.attributes: domain -> attributes
  kAttrDomain,   // device.attributes["d"]: id -> attribute
  kCapDomains,
  kCapDomain,
};

const char* TypeName(Type t) {
  switch (t) {
    case Type::kDyn:
      return "dyn";
    case Type::kBool:
      return "bool";
    case Type::kInt:
      return "int";
    case Type::kString:
      return "string";
    case Type::kQuantity:
      return "quantity";
    case Type::kSemver:
      return "semver";
    case Type::kList:
      return "list";
    case Type::kDevice:
      return "device";
    case Type::kAttrDomains:
      return "map(domain, attributes)";
    case Type::kAttrDomain:
      return "map(id, attribute)";
    case Type::kCapDomains:
      return "map(domain, capacities)";
    case Type::kCapDomain:
      return "map(id, quantity)";
  }
  return "?";
}

bool IsMap(Type t) {
  return t == Type::kAttrDomains || t == Type::kAttrDomain || t == Type::kCapDomains || t == Type::kCapDomain;
}

// A static type that may be `want` at run time.
bool May(Type t, Type want) { return t == want || t == Type::kDyn; }

enum class Op : uint8_t {
  kConst,  // type says which of b, i, s, q, v holds the value
  kDevice,
  kDriver,
  kAllowMulti,
  kAttributes,
  kCapacity,
  kIndex,       // kids: base, key
  kAttrEntry,   // device.attributes["d"].id with both names known: s = "d/id"
  kCapEntry,    // the same for capacity
  kHas,         // kids: domain map; s = id
  kHasAttrKey,  // presence of s = "d/id"
  kHasCapKey,
  kHasDomain,  // kids: map of domains, key; or, with no kids, prefix s = "d/" and attributes (b) or capacity
  kNot,
  kAnd,
  kOr,
  kCond,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kIn,  // kids: element, list literal
  kList,
  kCall,
};

enum class Fn : uint8_t {
  kQuantity,
  kIsQuantity,
  kSemver,
  kIsSemver,
  kCompareTo,
  kIsGreaterThan,
  kIsLessThan,
  kAsInteger,
  kIsInteger,
  kSign,
  kAdd,
  kSub,
  kMajor,
  kMinor,
  kPatch,
  kStartsWith,
  kEndsWith,
  kContains,
};

struct Node {
  Op op = Op::kConst;
  Type type = Type::kDyn;
  Fn fn = Fn::kQuantity;
  bool from_select = false;  // written as base.field (has() needs that)
  bool never = false;        // an entry name no device can have ("/" inside a domain or id)
  uint32_t pos = 0;          // byte offset of the construct, for messages
  uint32_t first = 0;        // children: kids[first, first + count)
  uint32_t count = 0;
  uint32_t height = 1;
  uint32_t split = 0;  // kAttrEntry/kCapEntry/kHasAttrKey/kHasCapKey: where the id starts in s
  bool b = false;
  int64_t i = 0;
  dra::Quantity q;
  dra::Semver v;
  std::string s;
};

}  // namespace

struct Program::Impl {
  std::string expression;
  std::vector<Node> nodes;
  std::vector<uint32_t> kids;
  uint32_t root = 0;
};

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Positions and messages

std::string Where(std::string_view src, uint32_t pos) {
  int line = 1;
  int col = 1;
  for (size_t k = 0; k < pos && k < src.size(); ++k) {
    if (src[k] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<unsigned char>(src[k]) & 0xC0) != 0x80) {  // count code points, not bytes
      ++col;
    }
  }
  if (line == 1) {
    return "column " + std::to_string(col);
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

// ---------------------------------------------------------------------------------------------------------------
// Lexer

enum class Tok : uint8_t { kEnd, kIdent, kInt, kString, kTrue, kFalse, kPunct };

struct Token {
  Tok kind = Tok::kEnd;
  uint32_t pos = 0;
  std::string_view text;  // as written (punctuation, identifiers, numbers)
  uint64_t magnitude = 0;
  bool overflow = false;  // int literal beyond uint64
  std::string str;        // decoded string literal
};

bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigitChar(char c) { return c >= '0' && c <= '9'; }
bool IsIdentChar(char c) { return IsIdentStart(c) || IsDigitChar(c); }
int HexValue(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool IsReserved(std::string_view w) {
  static constexpr std::array<std::string_view, 16> kReserved{
      "as",     "break", "const", "continue", "else",      "for",    "function", "if",
      "import", "let",   "loop",  "package",  "namespace", "return", "var",      "void"};
  for (std::string_view r : kReserved) {
    if (w == r) {
      return true;
    }
  }
  return w == "while";
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  common::Result<std::vector<Token>> Run() {
    std::vector<Token> out;
    while (true) {
      SkipSpace();
      Token t;
      t.pos = static_cast<uint32_t>(i_);
      if (i_ >= src_.size()) {
        out.push_back(std::move(t));
        return out;
      }
      const char c = src_[i_];
      common::Status s;
      if (IsIdentStart(c)) {
        s = Word(t);
      } else if (IsDigitChar(c) || (c == '.' && i_ + 1 < src_.size() && IsDigitChar(src_[i_ + 1]))) {
        s = Number(t);
      } else if (c == '"' || c == '\'') {
        s = String(t, /*raw=*/false);
      } else {
        s = Punct(t);
      }
      if (!s.ok()) {
        return s;
      }
      out.push_back(std::move(t));
    }
  }

 private:
  common::Status Syntax(size_t pos, std::string_view what) const {
    return common::InvalidArgument("CEL: syntax error at " + Where(src_, static_cast<uint32_t>(pos)) + ": " +
                                   std::string(what));
  }
  common::Status Unsupported(size_t pos, std::string_view what) const {
    return common::InvalidArgument("CEL: unsupported " + std::string(what) + " at " +
                                   Where(src_, static_cast<uint32_t>(pos)) + std::string(kSubsetNote));
  }

  void SkipSpace() {
    while (i_ < src_.size()) {
      const char c = src_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f') {
        ++i_;
      } else if (c == '/' && i_ + 1 < src_.size() && src_[i_ + 1] == '/') {
        while (i_ < src_.size() && src_[i_] != '\n') {
          ++i_;
        }
      } else {
        return;
      }
    }
  }

  common::Status Word(Token& t) {
    size_t j = i_;
    while (j < src_.size() && IsIdentChar(src_[j])) {
      ++j;
    }
    const std::string_view w = src_.substr(i_, j - i_);
    const bool quote_follows = j < src_.size() && (src_[j] == '"' || src_[j] == '\'');
    if (quote_follows && w.size() <= 2) {
      bool raw = false;
      bool bytes = false;
      bool prefix = true;
      for (char c : w) {
        raw = raw || c == 'r' || c == 'R';
        bytes = bytes || c == 'b' || c == 'B';
        prefix = prefix && (c == 'r' || c == 'R' || c == 'b' || c == 'B');
      }
      if (prefix && (w.size() == 1 || (raw && bytes))) {  // r"..", b"..", rb"..", br".." in any case
        if (bytes) {
          return Unsupported(i_, "bytes literal");
        }
        i_ = j;
        return String(t, raw);
      }
    }
    t.text = w;
    i_ = j;
    if (w == "true") {
      t.kind = Tok::kTrue;
    } else if (w == "false") {
      t.kind = Tok::kFalse;
    } else if (w == "null") {
      return Unsupported(t.pos, "null literal");
    } else if (w == "in") {
      t.kind = Tok::kPunct;
    } else if (IsReserved(w)) {
      return Syntax(t.pos, "\"" + std::string(w) + "\" is a reserved word");
    } else {
      t.kind = Tok::kIdent;
    }
    return common::Status::Ok();
  }

  common::Status Number(Token& t) {
    const size_t start = i_;
    t.kind = Tok::kInt;
    auto add_digit = [&t](uint64_t base, int d) {
      if (t.magnitude > (std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(d)) / base) {
        t.overflow = true;
      } else {
        t.magnitude = t.magnitude * base + static_cast<uint64_t>(d);
      }
    };
    if (src_[i_] == '0' && i_ + 1 < src_.size() && (src_[i_ + 1] == 'x' || src_[i_ + 1] == 'X')) {
      i_ += 2;
      const size_t digits = i_;
      while (i_ < src_.size() && HexValue(src_[i_]) >= 0) {
        add_digit(16, HexValue(src_[i_]));
        ++i_;
      }
      if (i_ == digits) {
        return Syntax(start, "hexadecimal literal without digits");
      }
    } else {
      while (i_ < src_.size() && IsDigitChar(src_[i_])) {
        add_digit(10, src_[i_] - '0');
        ++i_;
      }
      // A double: digits "." digits, or an exponent.
      bool is_double = false;
      if (i_ + 1 < src_.size() && src_[i_] == '.' && IsDigitChar(src_[i_ + 1])) {
        is_double = true;
        ++i_;
        while (i_ < src_.size() && IsDigitChar(src_[i_])) {
          ++i_;
        }
      }
      if (i_ < src_.size() && (src_[i_] == 'e' || src_[i_] == 'E')) {
        size_t k = i_ + 1;
        if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) {
          ++k;
        }
        if (k < src_.size() && IsDigitChar(src_[k])) {
          is_double = true;
          i_ = k;
          while (i_ < src_.size() && IsDigitChar(src_[i_])) {
            ++i_;
          }
        }
      }
      if (is_double) {
        return Unsupported(start, "double literal " + std::string(src_.substr(start, i_ - start)) +
                                      " (selectors compare ints, strings, quantities and versions)");
      }
    }
    if (i_ < src_.size() && (src_[i_] == 'u' || src_[i_] == 'U')) {
      return Unsupported(start, "unsigned integer literal " + std::string(src_.substr(start, i_ + 1 - start)) +
                                    " (attributes are signed ints)");
    }
    if (i_ < src_.size() && IsIdentChar(src_[i_])) {
      return Syntax(start, "malformed number \"" + std::string(src_.substr(start, i_ + 1 - start)) + "\"");
    }
    t.text = src_.substr(start, i_ - start);
    return common::Status::Ok();
  }

  // i_ is at the opening quote.
  common::Status String(Token& t, bool raw) {
    t.kind = Tok::kString;
    const char q = src_[i_];
    const bool triple = i_ + 2 < src_.size() && src_[i_ + 1] == q && src_[i_ + 2] == q;
    i_ += triple ? 3 : 1;
    while (true) {
      if (i_ >= src_.size()) {
        return Syntax(t.pos, "unterminated string literal");
      }
      const char c = src_[i_];
      if (triple && c == q && i_ + 2 < src_.size() && src_[i_ + 1] == q && src_[i_ + 2] == q) {
        i_ += 3;
        return common::Status::Ok();
      }
      if (!triple && c == q) {
        ++i_;
        return common::Status::Ok();
      }
      if (!triple && (c == '\n' || c == '\r')) {
        return Syntax(i_, "newline in a string literal (use a triple-quoted string)");
      }
      if (c != '\\' || raw) {
        t.str += c;
        ++i_;
        continue;
      }
      GPUSCHED_RETURN_IF_ERROR(Escape(t.str));
    }
  }

  // i_ is at the backslash.
  common::Status Escape(std::string& out) {
    const size_t at = i_;
    if (i_ + 1 >= src_.size()) {
      return Syntax(at, "unterminated escape sequence");
    }
    const char e = src_[i_ + 1];
    i_ += 2;
    switch (e) {
      case 'a':
        out += '\a';
        return common::Status::Ok();
      case 'b':
        out += '\b';
        return common::Status::Ok();
      case 'f':
        out += '\f';
        return common::Status::Ok();
      case 'n':
        out += '\n';
        return common::Status::Ok();
      case 'r':
        out += '\r';
        return common::Status::Ok();
      case 't':
        out += '\t';
        return common::Status::Ok();
      case 'v':
        out += '\v';
        return common::Status::Ok();
      case '\\':
      case '\'':
      case '"':
      case '`':
      case '?':
        out += e;
        return common::Status::Ok();
      default:
        break;
    }
    int hex_digits = 0;
    if (e == 'x' || e == 'X') {
      hex_digits = 2;
    } else if (e == 'u') {
      hex_digits = 4;
    } else if (e == 'U') {
      hex_digits = 8;
    }
    uint32_t cp = 0;
    if (hex_digits > 0) {
      for (int k = 0; k < hex_digits; ++k) {
        if (i_ >= src_.size() || HexValue(src_[i_]) < 0) {
          return Syntax(
              at, "escape \\" + std::string(1, e) + " wants " + std::to_string(hex_digits) + " hexadecimal digits");
        }
        cp = cp * 16 + static_cast<uint32_t>(HexValue(src_[i_]));
        ++i_;
      }
    } else if (e >= '0' && e <= '3') {
      cp = static_cast<uint32_t>(e - '0');
      for (int k = 0; k < 2; ++k) {
        if (i_ >= src_.size() || src_[i_] < '0' || src_[i_] > '7') {
          return Syntax(at, "octal escape wants three digits");
        }
        cp = cp * 8 + static_cast<uint32_t>(src_[i_] - '0');
        ++i_;
      }
    } else {
      return Syntax(at, "invalid escape sequence \\" + std::string(1, e));
    }
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      return Syntax(at, "escape is not a Unicode scalar value");
    }
    AppendUtf8(out, cp);
    return common::Status::Ok();
  }

  common::Status Punct(Token& t) {
    t.kind = Tok::kPunct;
    static constexpr std::array<std::string_view, 6> kTwo{"==", "!=", "<=", ">=", "&&", "||"};
    for (std::string_view p : kTwo) {
      if (src_.substr(i_, 2) == p) {
        t.text = src_.substr(i_, 2);
        i_ += 2;
        return common::Status::Ok();
      }
    }
    const char c = src_[i_];
    static constexpr std::string_view kOne = "<>!()[]{}.,?:+-*/%";
    if (kOne.find(c) != std::string_view::npos) {
      t.text = src_.substr(i_, 1);
      ++i_;
      return common::Status::Ok();
    }
    if (c == '=') {
      return Syntax(i_, "\"=\" is not an operator (compare with ==)");
    }
    if (c == '&' || c == '|') {
      return Syntax(i_, "\"" + std::string(1, c) + "\" is not an operator (use " + std::string(2, c) + ")");
    }
    return Syntax(i_, "unexpected character \"" + std::string(src_.substr(i_, 1)) + "\"");
  }

  std::string_view src_;
  size_t i_ = 0;
};

// ---------------------------------------------------------------------------------------------------------------
// Parser and checker: one pass, building the tree bottom-up with static types, folding what is constant.

bool IsAttrOrCapDomain(Type t) { return t == Type::kAttrDomain || t == Type::kCapDomain; }

struct FnInfo {
  std::string_view name;
  Fn fn;
  bool member;
};

// sign is both: Kubernetes' quantity library declares sign(q) and documents q.sign().
constexpr std::array<FnInfo, 19> kFunctions{{
    {"quantity", Fn::kQuantity, false},
    {"isQuantity", Fn::kIsQuantity, false},
    {"semver", Fn::kSemver, false},
    {"isSemver", Fn::kIsSemver, false},
    {"compareTo", Fn::kCompareTo, true},
    {"isGreaterThan", Fn::kIsGreaterThan, true},
    {"isLessThan", Fn::kIsLessThan, true},
    {"asInteger", Fn::kAsInteger, true},
    {"isInteger", Fn::kIsInteger, true},
    {"sign", Fn::kSign, true},
    {"sign", Fn::kSign, false},
    {"add", Fn::kAdd, true},
    {"sub", Fn::kSub, true},
    {"major", Fn::kMajor, true},
    {"minor", Fn::kMinor, true},
    {"patch", Fn::kPatch, true},
    {"startsWith", Fn::kStartsWith, true},
    {"endsWith", Fn::kEndsWith, true},
    {"contains", Fn::kContains, true},
}};

bool IsMacro(std::string_view name) {
  return name == "all" || name == "exists" || name == "exists_one" || name == "map" || name == "filter" ||
         name == "existsOne" || name == "transformList" || name == "transformMap" || name == "sortBy";
}

common::Result<dra::Semver> ParseSemverNormalized(std::string_view text);

class Parser {
 public:
  Parser(std::string_view src, std::vector<Token> tokens, Program::Impl& out)
      : src_(src), toks_(std::move(tokens)), out_(out) {}

  common::Status Run() {
    GPUSCHED_ASSIGN_OR_RETURN(root, Expr());
    if (Peek().kind != Tok::kEnd) {
      return Syntax(Peek().pos, "unexpected \"" + std::string(Peek().text.empty() ? "string" : Peek().text) +
                                    "\" after the end of the expression");
    }
    const Node& r = out_.nodes[root];
    if (!May(r.type, Type::kBool)) {
      return TypeError(r.pos, std::string("the selector must evaluate to bool, not ") + TypeName(r.type));
    }
    out_.root = root;
    return common::Status::Ok();
  }

 private:
  // --- messages
  common::Status Syntax(uint32_t pos, std::string_view what) const {
    return common::InvalidArgument("CEL: syntax error at " + Where(src_, pos) + ": " + std::string(what));
  }
  common::Status Unsupported(uint32_t pos, std::string_view what) const {
    return common::InvalidArgument("CEL: unsupported " + std::string(what) + " at " + Where(src_, pos) +
                                   std::string(kSubsetNote));
  }
  common::Status TypeError(uint32_t pos, std::string_view what) const {
    return common::InvalidArgument("CEL: " + std::string(what) + " at " + Where(src_, pos));
  }
  common::Status NoOverload(uint32_t pos, std::string_view fn, std::initializer_list<Type> args) const {
    std::string list;
    for (Type t : args) {
      list += list.empty() ? "" : ", ";
      list += TypeName(t);
    }
    return TypeError(pos, "no matching overload for " + std::string(fn) + " applied to (" + list + ")");
  }

  // --- tokens
  const Token& Peek(size_t ahead = 0) const { return toks_[std::min(next_ + ahead, toks_.size() - 1)]; }
  bool IsPunct(std::string_view p, size_t ahead = 0) const {
    const Token& t = Peek(ahead);
    return t.kind == Tok::kPunct && t.text == p;
  }
  bool Accept(std::string_view p) {
    if (IsPunct(p)) {
      ++next_;
      return true;
    }
    return false;
  }
  common::Status Expect(std::string_view p) {
    if (Accept(p)) {
      return common::Status::Ok();
    }
    const Token& t = Peek();
    std::string got = t.kind == Tok::kEnd      ? "the end of the expression"
                      : t.kind == Tok::kString ? "a string"
                                               : "\"" + std::string(t.text) + "\"";
    return Syntax(t.pos, "expected \"" + std::string(p) + "\", got " + got);
  }

  // --- nodes
  Node& At(uint32_t n) { return out_.nodes[n]; }
  common::Result<uint32_t> Add(Node node, std::initializer_list<uint32_t> kids) {
    return Add(std::move(node), std::vector<uint32_t>(kids));
  }
  common::Result<uint32_t> Add(Node node, const std::vector<uint32_t>& kids) {
    node.first = static_cast<uint32_t>(out_.kids.size());
    node.count = static_cast<uint32_t>(kids.size());
    uint32_t height = 0;
    for (uint32_t k : kids) {
      height = std::max(height, out_.nodes[k].height);
      out_.kids.push_back(k);
    }
    node.height = height + 1;
    if (node.height > static_cast<uint32_t>(Program::kMaxDepth)) {
      return TypeError(node.pos, "expression nested deeper than " + std::to_string(Program::kMaxDepth) + " levels");
    }
    out_.nodes.push_back(std::move(node));
    return static_cast<uint32_t>(out_.nodes.size() - 1);
  }
  uint32_t Kid(uint32_t n, uint32_t k) const { return out_.kids[out_.nodes[n].first + k]; }
  static Node Make(Op op, Type type, uint32_t pos) {
    Node n;
    n.op = op;
    n.type = type;
    n.pos = pos;
    return n;
  }
  bool IsConstString(uint32_t n) const { return out_.nodes[n].op == Op::kConst && out_.nodes[n].type == Type::kString; }

  // --- grammar
  common::Result<uint32_t> Expr() {
    if (++depth_ > Program::kMaxDepth) {
      return TypeError(Peek().pos, "expression nested deeper than " + std::to_string(Program::kMaxDepth) + " levels");
    }
    GPUSCHED_ASSIGN_OR_RETURN(cond, Or());
    if (IsPunct("?")) {
      const uint32_t pos = Peek().pos;
      ++next_;
      GPUSCHED_ASSIGN_OR_RETURN(then, Or());
      GPUSCHED_RETURN_IF_ERROR(Expect(":"));
      GPUSCHED_ASSIGN_OR_RETURN(otherwise, Expr());
      GPUSCHED_ASSIGN_OR_RETURN(made, MakeCond(pos, cond, then, otherwise));
      --depth_;
      return made;
    }
    --depth_;
    return cond;
  }

  common::Result<uint32_t> Or() { return Logical("||", Op::kOr, &Parser::And); }
  common::Result<uint32_t> And() { return Logical("&&", Op::kAnd, &Parser::Relation); }

  common::Result<uint32_t> Logical(std::string_view op, Op kind, common::Result<uint32_t> (Parser::*sub)()) {
    const uint32_t pos = Peek().pos;
    GPUSCHED_ASSIGN_OR_RETURN(first, (this->*sub)());
    if (!IsPunct(op)) {
      return first;
    }
    std::vector<uint32_t> terms{first};
    while (IsPunct(op)) {
      ++next_;
      GPUSCHED_ASSIGN_OR_RETURN(term, (this->*sub)());
      terms.push_back(term);
    }
    for (uint32_t t : terms) {
      if (!May(At(t).type, Type::kBool)) {
        return NoOverload(At(t).pos, "\"" + std::string(op) + "\"", {At(t).type});
      }
    }
    return Add(Make(kind, Type::kBool, pos), terms);
  }

  common::Result<uint32_t> Relation() {
    GPUSCHED_ASSIGN_OR_RETURN(left, Addition());
    static constexpr std::array<std::pair<std::string_view, Op>, 7> kRelops{{
        {"==", Op::kEq},
        {"!=", Op::kNe},
        {"<", Op::kLt},
        {"<=", Op::kLe},
        {">", Op::kGt},
        {">=", Op::kGe},
        {"in", Op::kIn},
    }};
    while (true) {
      const Token& t = Peek();
      if (t.kind != Tok::kPunct) {
        return left;
      }
      Op op = Op::kConst;
      for (const auto& [text, o] : kRelops) {
        if (t.text == text) {
          op = o;
        }
      }
      if (op == Op::kConst) {
        return left;
      }
      const uint32_t pos = t.pos;
      const std::string_view text = t.text;
      ++next_;
      GPUSCHED_ASSIGN_OR_RETURN(right, Addition());
      GPUSCHED_ASSIGN_OR_RETURN(made, MakeRelation(op, text, pos, left, right));
      left = made;
    }
  }

  common::Result<uint32_t> Addition() {
    GPUSCHED_ASSIGN_OR_RETURN(left, Unary());
    const Token& t = Peek();
    if (t.kind == Tok::kPunct && (t.text == "+" || t.text == "-" || t.text == "*" || t.text == "/" || t.text == "%")) {
      return Unsupported(t.pos, "operator \"" + std::string(t.text) + "\" (arithmetic)");
    }
    return left;
  }

  common::Result<uint32_t> Unary() {
    if (IsPunct("!")) {
      const uint32_t pos = Peek().pos;
      ++next_;
      if (++depth_ > Program::kMaxDepth) {
        return TypeError(pos, "expression nested deeper than " + std::to_string(Program::kMaxDepth) + " levels");
      }
      GPUSCHED_ASSIGN_OR_RETURN(operand, Unary());
      --depth_;
      if (!May(At(operand).type, Type::kBool)) {
        return NoOverload(pos, "\"!\"", {At(operand).type});
      }
      return Add(Make(Op::kNot, Type::kBool, pos), {operand});
    }
    if (IsPunct("-")) {
      const uint32_t pos = Peek().pos;
      // Only a negative integer literal: -5, as in quantity("1").sub(-5).
      if (Peek(1).kind == Tok::kInt && !IsPunct(".", 2) && !IsPunct("[", 2)) {
        ++next_;
        const Token& lit = Peek();
        ++next_;
        constexpr uint64_t kMinMagnitude = uint64_t{1} << 63;
        if (lit.overflow || lit.magnitude > kMinMagnitude) {
          return TypeError(lit.pos, "integer literal -" + std::string(lit.text) + " is out of int64 range");
        }
        Node n = Make(Op::kConst, Type::kInt, pos);
        n.i =
            lit.magnitude == kMinMagnitude ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(lit.magnitude);
        return Add(std::move(n), {});
      }
      return Unsupported(pos, "operator \"-\" (arithmetic; only negative integer literals are read)");
    }
    return Member();
  }

  common::Result<uint32_t> Member() {
    GPUSCHED_ASSIGN_OR_RETURN(node, Primary());
    while (true) {
      if (IsPunct(".")) {
        ++next_;
        const Token& name = Peek();
        if (name.kind != Tok::kIdent) {
          return Syntax(name.pos, "expected a field or method name after \".\"");
        }
        ++next_;
        if (IsPunct("(")) {
          GPUSCHED_ASSIGN_OR_RETURN(call, Call(name, node));
          node = call;
        } else {
          GPUSCHED_ASSIGN_OR_RETURN(sel, Select(name, node));
          node = sel;
        }
      } else if (IsPunct("[")) {
        const uint32_t pos = Peek().pos;
        ++next_;
        GPUSCHED_ASSIGN_OR_RETURN(key, Expr());
        GPUSCHED_RETURN_IF_ERROR(Expect("]"));
        GPUSCHED_ASSIGN_OR_RETURN(idx, Index(pos, node, key, /*from_select=*/false));
        node = idx;
      } else {
        break;
      }
    }
    if (At(node).type == Type::kDevice) {
      return TypeError(At(node).pos,
                       "the variable device is read through its fields (device.driver, device.attributes, "
                       "device.capacity, device.allowMultipleAllocations)");
    }
    return node;
  }

  common::Result<uint32_t> Primary() {
    const Token& t = Peek();
    const uint32_t pos = t.pos;
    switch (t.kind) {
      case Tok::kEnd:
        return Syntax(pos, "unexpected end of the expression");
      case Tok::kTrue:
      case Tok::kFalse: {
        Node n = Make(Op::kConst, Type::kBool, pos);
        n.b = t.kind == Tok::kTrue;
        ++next_;
        return Add(std::move(n), {});
      }
      case Tok::kInt: {
        if (t.overflow || t.magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return TypeError(pos, "integer literal " + std::string(t.text) + " is out of int64 range");
        }
        Node n = Make(Op::kConst, Type::kInt, pos);
        n.i = static_cast<int64_t>(t.magnitude);
        ++next_;
        return Add(std::move(n), {});
      }
      case Tok::kString: {
        Node n = Make(Op::kConst, Type::kString, pos);
        n.s = t.str;
        ++next_;
        return Add(std::move(n), {});
      }
      case Tok::kIdent: {
        ++next_;
        if (IsPunct("(")) {
          return Call(t, std::nullopt);
        }
        if (t.text == "device") {
          return Add(Make(Op::kDevice, Type::kDevice, pos), {});
        }
        if (IsPunct(".") && Peek(1).kind == Tok::kIdent && IsPunct("(", 2)) {
          return Unsupported(pos, "function \"" + std::string(t.text) + "." + std::string(Peek(1).text) + "\"");
        }
        return Unsupported(pos, "variable \"" + std::string(t.text) + "\" (selectors see only device)");
      }
      case Tok::kPunct:
        break;
    }
    if (t.text == "(") {
      ++next_;
      GPUSCHED_ASSIGN_OR_RETURN(inner, Expr());
      GPUSCHED_RETURN_IF_ERROR(Expect(")"));
      return inner;
    }
    if (t.text == "[") {
      ++next_;
      std::vector<uint32_t> elems;
      while (!IsPunct("]")) {
        GPUSCHED_ASSIGN_OR_RETURN(e, Expr());
        const Type et = At(e).type;
        if (et == Type::kList || IsMap(et)) {
          return Unsupported(At(e).pos, std::string("list element of type ") + TypeName(et));
        }
        elems.push_back(e);
        if (!Accept(",")) {
          break;
        }
      }
      GPUSCHED_RETURN_IF_ERROR(Expect("]"));
      Node n = Make(Op::kList, Type::kList, pos);
      // The element type when all agree (checked against the left of `in`), else dyn.
      Type elem = elems.empty() ? Type::kDyn : At(elems[0]).type;
      for (uint32_t e : elems) {
        if (At(e).type != elem) {
          elem = Type::kDyn;
        }
      }
      n.i = static_cast<int64_t>(elem);
      return Add(std::move(n), elems);
    }
    if (t.text == "{") {
      return Unsupported(pos, "map literal");
    }
    if (t.text == ".") {
      return Unsupported(pos, "leading \".\" (root-scoped name)");
    }
    return Syntax(pos, "unexpected \"" + std::string(t.text) + "\"");
  }

  // --- constructs
  common::Result<uint32_t> MakeCond(uint32_t pos, uint32_t cond, uint32_t then, uint32_t otherwise) {
    if (!May(At(cond).type, Type::kBool)) {
      return NoOverload(pos, "\"?:\"", {At(cond).type});
    }
    const Type a = At(then).type;
    const Type b = At(otherwise).type;
    if (a == Type::kList || b == Type::kList) {
      return Unsupported(pos, "list in a branch of \"?:\" (lists are read only on the right of in)");
    }
    if (a != b && a != Type::kDyn && b != Type::kDyn) {
      return TypeError(
          pos, std::string("the branches of \"?:\" have different types (") + TypeName(a) + ", " + TypeName(b) + ")");
    }
    return Add(Make(Op::kCond, a == b ? a : Type::kDyn, pos), {cond, then, otherwise});
  }

  common::Result<uint32_t> MakeRelation(Op op, std::string_view text, uint32_t pos, uint32_t l, uint32_t r) {
    const Type lt = At(l).type;
    const Type rt = At(r).type;
    const std::string name = "\"" + std::string(text) + "\"";
    if (op == Op::kIn) {
      if (lt == Type::kList || IsMap(lt)) {
        return NoOverload(pos, name, {lt, rt});
      }
      if (rt == Type::kList) {
        const auto elem = static_cast<Type>(At(r).i);
        if (lt != Type::kDyn && elem != Type::kDyn && lt != elem) {
          return NoOverload(pos, name, {lt, rt});
        }
        return Add(Make(Op::kIn, Type::kBool, pos), {l, r});
      }
      if (rt == Type::kAttrDomains || rt == Type::kCapDomains) {
        if (!May(lt, Type::kString)) {
          return NoOverload(pos, name, {lt, rt});
        }
        Node n = Make(Op::kHasDomain, Type::kBool, pos);
        if (IsConstString(l)) {  // "d" in device.attributes: one lower_bound on the prefix "d/"
          n.s = At(l).s + "/";
          n.b = rt == Type::kAttrDomains;
          n.never = At(l).s.find('/') != std::string::npos;
          return Add(std::move(n), {});
        }
        return Add(std::move(n), {r, l});
      }
      if (IsAttrOrCapDomain(rt)) {
        if (!May(lt, Type::kString)) {
          return NoOverload(pos, name, {lt, rt});
        }
        if (IsConstString(l)) {
          return HasEntry(pos, r, At(l).s);
        }
        Node n = Make(Op::kIn, Type::kBool, pos);
        return Add(std::move(n), {l, r});
      }
      if (rt == Type::kDyn) {
        return Add(Make(Op::kIn, Type::kBool, pos), {l, r});
      }
      return NoOverload(pos, name, {lt, rt});
    }
    if (lt == Type::kList || rt == Type::kList) {
      return Unsupported(pos, "comparison of lists (lists are read only on the right of in)");
    }
    if (IsMap(lt) || IsMap(rt)) {
      return Unsupported(pos, "comparison of maps");
    }
    if (lt != rt && lt != Type::kDyn && rt != Type::kDyn) {
      return NoOverload(pos, name, {lt, rt});
    }
    if (op != Op::kEq && op != Op::kNe) {
      for (Type t : {lt, rt}) {
        if (t != Type::kDyn && t != Type::kInt && t != Type::kString && t != Type::kBool) {
          return TypeError(pos, "no matching overload for " + name + " applied to (" + TypeName(lt) + ", " +
                                    TypeName(rt) + "): compare " + TypeName(t) +
                                    " values with compareTo, isGreaterThan or isLessThan");
        }
      }
    }
    return Add(Make(op, Type::kBool, pos), {l, r});
  }

  // Presence of `id` in a domain map node (folded to one lookup when the domain is a literal).
  common::Result<uint32_t> HasEntry(uint32_t pos, uint32_t domain_map, const std::string& id) {
    const Node& dm = At(domain_map);
    const bool attrs = dm.type == Type::kAttrDomain;
    if (dm.op == Op::kIndex && IsConstString(Kid(domain_map, 1))) {
      Node n = Make(attrs ? Op::kHasAttrKey : Op::kHasCapKey, Type::kBool, pos);
      const std::string& domain = At(Kid(domain_map, 1)).s;
      n.s = domain + "/" + id;
      n.split = static_cast<uint32_t>(domain.size() + 1);
      n.never = domain.find('/') != std::string::npos || id.find('/') != std::string::npos;
      return Add(std::move(n), {});
    }
    Node n = Make(Op::kHas, Type::kBool, pos);
    n.s = id;
    return Add(std::move(n), {domain_map});
  }

  common::Result<uint32_t> Select(const Token& name, uint32_t base) {
    const Node& b = At(base);
    const uint32_t pos = name.pos;
    if (b.type == Type::kDevice) {
      Op op = Op::kConst;
      Type type = Type::kDyn;
      if (name.text == "driver") {
        op = Op::kDriver;
        type = Type::kString;
      } else if (name.text == "attributes") {
        op = Op::kAttributes;
        type = Type::kAttrDomains;
      } else if (name.text == "capacity") {
        op = Op::kCapacity;
        type = Type::kCapDomains;
      } else if (name.text == "allowMultipleAllocations") {
        op = Op::kAllowMulti;
        type = Type::kBool;
      } else {
        return TypeError(pos, "undefined field \"" + std::string(name.text) +
                                  "\" of device (driver, attributes, capacity, allowMultipleAllocations)");
      }
      Node n = Make(op, type, pos);
      n.from_select = true;
      return Add(std::move(n), {});
    }
    if (IsMap(b.type) || b.type == Type::kDyn) {
      Node key = Make(Op::kConst, Type::kString, pos);
      key.s = std::string(name.text);
      GPUSCHED_ASSIGN_OR_RETURN(k, Add(std::move(key), {}));
      return Index(pos, base, k, /*from_select=*/true);
    }
    return TypeError(pos, "type " + std::string(TypeName(b.type)) + " has no field \"" + std::string(name.text) + "\"");
  }

  common::Result<uint32_t> Index(uint32_t pos, uint32_t base, uint32_t key, bool from_select) {
    const Type bt = At(base).type;
    const Type kt = At(key).type;
    Type result = Type::kDyn;
    switch (bt) {
      case Type::kAttrDomains:
        result = Type::kAttrDomain;
        break;
      case Type::kCapDomains:
        result = Type::kCapDomain;
        break;
      case Type::kAttrDomain:
        result = Type::kDyn;
        break;
      case Type::kCapDomain:
        result = Type::kQuantity;
        break;
      case Type::kDyn:
        result = Type::kDyn;  // an attribute value: never a map, so this fails at run time as in CEL
        break;
      case Type::kList:
        return Unsupported(pos, "list indexing");
      default:
        return TypeError(pos, std::string("type ") + TypeName(bt) + " does not support indexing");
    }
    if (!May(kt, Type::kString)) {
      return NoOverload(pos, "\"[]\"", {bt, kt});
    }
    // device.attributes["d"].id with both names literal: one map lookup of "d/id" per evaluation.
    if ((bt == Type::kAttrDomain || bt == Type::kCapDomain) && At(base).op == Op::kIndex &&
        IsConstString(Kid(base, 1)) && IsConstString(key)) {
      Node n = Make(bt == Type::kAttrDomain ? Op::kAttrEntry : Op::kCapEntry, result, pos);
      const std::string& domain = At(Kid(base, 1)).s;
      const std::string& id = At(key).s;
      n.s = domain + "/" + id;
      n.split = static_cast<uint32_t>(domain.size() + 1);
      n.never = domain.find('/') != std::string::npos || id.find('/') != std::string::npos;
      n.from_select = from_select;
      return Add(std::move(n), {base, key});  // kids kept for has()
    }
    Node n = Make(Op::kIndex, result, pos);
    n.from_select = from_select;
    return Add(std::move(n), {base, key});
  }

  common::Result<std::vector<uint32_t>> Args() {
    GPUSCHED_RETURN_IF_ERROR(Expect("("));
    std::vector<uint32_t> args;
    while (!IsPunct(")")) {
      GPUSCHED_ASSIGN_OR_RETURN(a, Expr());
      args.push_back(a);
      if (!Accept(",")) {
        break;
      }
    }
    GPUSCHED_RETURN_IF_ERROR(Expect(")"));
    return args;
  }

  common::Result<uint32_t> Call(const Token& name, std::optional<uint32_t> receiver) {
    const uint32_t pos = name.pos;
    const std::string_view fname = name.text;
    if (IsMacro(fname)) {
      return Unsupported(pos, "macro \"" + std::string(fname) + "\"");
    }
    if (fname == "matches") {
      return Unsupported(pos,
                         "function \"matches\" (gpusched does not evaluate regular expressions; use "
                         "startsWith, endsWith, contains or in)");
    }
    if (fname == "has" && !receiver) {
      return Has(pos);
    }
    const FnInfo* info = nullptr;
    for (const FnInfo& f : kFunctions) {
      if (f.name == fname && f.member == receiver.has_value()) {
        info = &f;
      }
    }
    if (info == nullptr) {
      return Unsupported(pos, std::string(receiver ? "method" : "function") + " \"" + std::string(fname) + "\"");
    }
    GPUSCHED_ASSIGN_OR_RETURN(args, Args());
    if (receiver) {
      args.insert(args.begin(), *receiver);
    }
    std::vector<Type> types;
    for (uint32_t a : args) {
      types.push_back(At(a).type);
    }
    auto bad = [&]() {
      std::string list;
      for (size_t k = receiver ? 1 : 0; k < types.size(); ++k) {
        list += list.empty() ? "" : ", ";
        list += TypeName(types[k]);
      }
      std::string what = "no matching overload for " + std::string(fname) + "(" + list + ")";
      if (receiver) {
        what += " on " + std::string(TypeName(types[0]));
      }
      return TypeError(pos, what);
    };
    auto arity = [&](size_t lo, size_t hi) { return types.size() >= lo && types.size() <= hi; };
    Type result = Type::kDyn;
    switch (info->fn) {
      case Fn::kQuantity:
      case Fn::kIsQuantity:
        if (!arity(1, 1) || !May(types[0], Type::kString)) {
          return bad();
        }
        result = info->fn == Fn::kQuantity ? Type::kQuantity : Type::kBool;
        break;
      case Fn::kSemver:
      case Fn::kIsSemver:
        if (!arity(1, 2) || !May(types[0], Type::kString) || (types.size() == 2 && !May(types[1], Type::kBool))) {
          return bad();
        }
        result = info->fn == Fn::kSemver ? Type::kSemver : Type::kBool;
        break;
      case Fn::kCompareTo:
      case Fn::kIsGreaterThan:
      case Fn::kIsLessThan: {
        if (!arity(2, 2)) {
          return bad();
        }
        const Type a = types[0];
        const Type b = types[1];
        const bool ok = (a == Type::kQuantity && May(b, Type::kQuantity)) ||
                        (a == Type::kSemver && May(b, Type::kSemver)) ||
                        (a == Type::kDyn && (b == Type::kQuantity || b == Type::kSemver || b == Type::kDyn));
        if (!ok) {
          return bad();
        }
        result = info->fn == Fn::kCompareTo ? Type::kInt : Type::kBool;
        break;
      }
      case Fn::kAsInteger:
      case Fn::kIsInteger:
      case Fn::kSign:
        if (!arity(1, 1) || !May(types[0], Type::kQuantity)) {
          return bad();
        }
        result = info->fn == Fn::kIsInteger ? Type::kBool : Type::kInt;
        break;
      case Fn::kAdd:
      case Fn::kSub:
        if (!arity(2, 2) || !May(types[0], Type::kQuantity) ||
            !(types[1] == Type::kQuantity || types[1] == Type::kInt || types[1] == Type::kDyn)) {
          return bad();
        }
        result = Type::kQuantity;
        break;
      case Fn::kMajor:
      case Fn::kMinor:
      case Fn::kPatch:
        if (!arity(1, 1) || !May(types[0], Type::kSemver)) {
          return bad();
        }
        result = Type::kInt;
        break;
      case Fn::kStartsWith:
      case Fn::kEndsWith:
      case Fn::kContains:
        if (!arity(2, 2) || !May(types[0], Type::kString) || !May(types[1], Type::kString)) {
          return bad();
        }
        result = Type::kBool;
        break;
    }
    // Fold quantity("40Gi"), semver("1.2.3"), isQuantity(..), isSemver(..) of literals; a literal that does not
    // parse stays a call and fails when evaluated, as in CEL.
    const bool const_args = [&] {
      for (uint32_t a : args) {
        if (At(a).op != Op::kConst) {
          return false;
        }
      }
      return true;
    }();
    const bool foldable = info->fn == Fn::kQuantity || info->fn == Fn::kIsQuantity || info->fn == Fn::kSemver ||
                          info->fn == Fn::kIsSemver;
    if (const_args && foldable) {
      const std::string& text = At(args[0]).s;
      const bool normalize = args.size() == 2 && At(args[1]).b;
      Node n = Make(Op::kConst, result, pos);
      if (info->fn == Fn::kQuantity || info->fn == Fn::kIsQuantity) {
        auto q = dra::ParseQuantity(text);
        if (info->fn == Fn::kIsQuantity) {
          n.b = q.ok();
          return Add(std::move(n), {});
        }
        if (q.ok()) {
          n.q = *q;
          return Add(std::move(n), {});
        }
      } else {
        auto v = normalize ? ParseSemverNormalized(text) : dra::ParseSemver(text);
        if (info->fn == Fn::kIsSemver) {
          n.b = v.ok();
          return Add(std::move(n), {});
        }
        if (v.ok()) {
          n.v = std::move(*v);
          return Add(std::move(n), {});
        }
      }
    }
    Node n = Make(Op::kCall, result, pos);
    n.fn = info->fn;
    return Add(std::move(n), args);
  }

  common::Result<uint32_t> Has(uint32_t pos) {
    GPUSCHED_ASSIGN_OR_RETURN(args, Args());
    if (args.size() != 1 || !At(args[0]).from_select) {
      return TypeError(pos,
                       "invalid argument to has(): it takes one field selection, like "
                       "has(device.attributes[\"gpu.example.com\"].model)");
    }
    const uint32_t sel = args[0];
    const Node& s = At(sel);
    if (s.op == Op::kAttrEntry || s.op == Op::kCapEntry) {
      Node n = Make(s.op == Op::kAttrEntry ? Op::kHasAttrKey : Op::kHasCapKey, Type::kBool, pos);
      n.s = s.s;
      n.split = s.split;
      n.never = s.never;
      return Add(std::move(n), {});
    }
    if (s.op == Op::kIndex && IsAttrOrCapDomain(At(Kid(sel, 0)).type)) {
      const std::string id = At(Kid(sel, 1)).s;
      return HasEntry(pos, Kid(sel, 0), id);
    }
    return Unsupported(pos, "has() on " + std::string(s.op == Op::kIndex ? TypeName(At(Kid(sel, 0)).type) : "device") +
                                " (has() tests entries: has(device.attributes[\"d\"].id), "
                                "has(device.capacity[\"d\"].id); for a domain write \"d\" in device.attributes)");
  }

  std::string_view src_;
  std::vector<Token> toks_;
  Program::Impl& out_;
  size_t next_ = 0;
  int depth_ = 0;
};

// Kubernetes' normalising semver(s, true): drops one leading "v", fills a missing minor or patch with 0 and drops
// leading zeros of each part, then parses strictly.
common::Result<dra::Semver> ParseSemverNormalized(std::string_view text) {
  std::string_view s = text;
  if (!s.empty() && s.front() == 'v') {
    s.remove_prefix(1);
  }
  std::vector<std::string> parts;
  while (parts.size() < 2) {
    const size_t dot = s.find('.');
    if (dot == std::string_view::npos) {
      break;
    }
    parts.emplace_back(s.substr(0, dot));
    s.remove_prefix(dot + 1);
  }
  parts.emplace_back(s);
  for (std::string& p : parts) {
    if (p.size() > 1) {
      const size_t nz = p.find_first_not_of('0');
      p = nz == std::string::npos ? "" : p.substr(nz);
      if (p.empty() || !IsDigitChar(p[0])) {
        p = "0" + p;
      }
    }
  }
  if (parts.size() < 3) {
    if (parts.back().find_first_of("+-") != std::string::npos) {
      return common::InvalidArgument("semantic version \"" + std::string(text) +
                                     "\": a short version cannot carry a prerelease or build metadata");
    }
    while (parts.size() < 3) {
      parts.emplace_back("0");
    }
  }
  return dra::ParseSemver(parts[0] + "." + parts[1] + "." + parts[2]);
}

// ---------------------------------------------------------------------------------------------------------------
// Evaluation

enum class Kind : uint8_t {
  kError,
  kBool,
  kInt,
  kString,
  kQuantity,
  kSemver,
  kAttrDomains,
  kAttrDomain,
  kCapDomains,
  kCapDomain
};

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kError:
      return "error";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kString:
      return "string";
    case Kind::kQuantity:
      return "quantity";
    case Kind::kSemver:
      return "semver";
    case Kind::kAttrDomains:
    case Kind::kAttrDomain:
    case Kind::kCapDomains:
    case Kind::kCapDomain:
      return "map";
  }
  return "?";
}

struct Value {
  Kind kind = Kind::kError;
  bool b = false;
  int64_t i = 0;       // int, quantity milli, error index
  std::string_view s;  // string, domain
  const dra::Semver* v = nullptr;

  static Value Bool(bool x) {
    Value r;
    r.kind = Kind::kBool;
    r.b = x;
    return r;
  }
  static Value Int(int64_t x) {
    Value r;
    r.kind = Kind::kInt;
    r.i = x;
    return r;
  }
  static Value Str(std::string_view x) {
    Value r;
    r.kind = Kind::kString;
    r.s = x;
    return r;
  }
  static Value Qty(int64_t milli) {
    Value r;
    r.kind = Kind::kQuantity;
    r.i = milli;
    return r;
  }
  static Value Ver(const dra::Semver* x) {
    Value r;
    r.kind = Kind::kSemver;
    r.v = x;
    return r;
  }
  static Value Map(Kind k, std::string_view domain = {}) {
    Value r;
    r.kind = k;
    r.s = domain;
    return r;
  }
};

enum class Eq : uint8_t { kFalse, kTrue, kNoOverload };

// CEL equality over run-time values: different types are unequal, except that a version on the left is an error
// (Kubernetes' Semver.Equal); versions are equal by precedence (build ignored).
Eq Equal(const Value& l, const Value& r) {
  if (l.kind != r.kind) {
    return l.kind == Kind::kSemver ? Eq::kNoOverload : Eq::kFalse;
  }
  bool same = false;
  switch (l.kind) {
    case Kind::kBool:
      same = l.b == r.b;
      break;
    case Kind::kInt:
    case Kind::kQuantity:
      same = l.i == r.i;
      break;
    case Kind::kString:
      same = l.s == r.s;
      break;
    case Kind::kSemver:
      same = dra::CompareSemver(*l.v, *r.v) == std::weak_ordering::equivalent;
      break;
    default:
      return Eq::kNoOverload;
  }
  return same ? Eq::kTrue : Eq::kFalse;
}

int Sign3(std::weak_ordering o) { return o < 0 ? -1 : o > 0 ? 1 : 0; }

class Evaluator {
 public:
  Evaluator(const Program::Impl& p, const DeviceInput& in) : p_(p), in_(in) {}

  common::Result<bool> Run() {
    const Value v = Eval(p_.root);
    if (v.kind == Kind::kBool) {
      return v.b;
    }
    if (v.kind == Kind::kError) {
      return common::InvalidArgument(errors_[static_cast<size_t>(v.i)]);
    }
    return common::InvalidArgument(std::string("CEL: the selector evaluated to ") + KindName(v.kind) +
                                   ", not bool, at " + Where(p_.expression, p_.nodes[p_.root].pos));
  }

 private:
  Value Error(const Node& n, std::string what) {
    errors_.push_back("CEL: " + what + " at " + Where(p_.expression, n.pos));
    Value r;
    r.i = static_cast<int64_t>(errors_.size() - 1);
    return r;
  }
  Value NoOverload(const Node& n, std::string_view fn, std::initializer_list<Kind> kinds) {
    std::string list;
    for (Kind k : kinds) {
      list += list.empty() ? "" : ", ";
      list += KindName(k);
    }
    return Error(n, "no such overload: " + std::string(fn) + " applied to (" + list + ")");
  }
  uint32_t Kid(const Node& n, uint32_t k) const { return p_.kids[n.first + k]; }

  // Keeps a version parsed during this evaluation at a stable address: a few in place, more on the heap.
  const dra::Semver* Keep(dra::Semver v) {
    if (kept_ < inline_semvers_.size()) {
      inline_semvers_[kept_] = std::move(v);
      return &inline_semvers_[kept_++];
    }
    semvers_.push_front(std::move(v));
    return &semvers_.front();
  }

  Value Attribute(const Node& n, const std::string& name, const dra::AttributeValue& a) {
    switch (a.kind) {
      case dra::AttributeKind::kInt:
        return Value::Int(a.int_value);
      case dra::AttributeKind::kBool:
        return Value::Bool(a.bool_value);
      case dra::AttributeKind::kString:
        return Value::Str(a.string_value);
      case dra::AttributeKind::kVersion: {
        auto v = dra::ParseSemver(a.string_value);
        if (!v.ok()) {
          return Error(n, "attribute " + name + ": " + v.status().message());
        }
        return Value::Ver(Keep(std::move(*v)));
      }
    }
    return Error(n, "attribute " + name + " has an unknown type");
  }

  static std::string MissingKey(bool attrs, std::string_view domain, std::string_view id) {
    return "no such key: " + std::string(id) + " (device." + (attrs ? "attributes" : "capacity") + "[\"" +
           std::string(domain) + "\"] has no entry \"" + std::string(id) + "\")";
  }

  // The entry domain/id, or a "no such key" error.
  Value Entry(const Node& n, bool attrs, const std::string& qualified, size_t split, bool never) {
    const dra::Device& d = *in_.device;
    const std::string_view domain = std::string_view(qualified).substr(0, split - 1);
    const std::string_view id = std::string_view(qualified).substr(split);
    if (attrs) {
      auto it = never ? d.attributes.end() : d.attributes.find(qualified);
      if (it == d.attributes.end()) {
        return Error(n, MissingKey(true, domain, id));
      }
      return Attribute(n, qualified, it->second);
    }
    auto it = never ? d.capacity.end() : d.capacity.find(qualified);
    if (it == d.capacity.end()) {
      return Error(n, MissingKey(false, domain, id));
    }
    return Value::Qty(it->second.value.milli);
  }

  bool HasKey(bool attrs, const std::string& qualified) const {
    const dra::Device& d = *in_.device;
    return attrs ? d.attributes.contains(qualified) : d.capacity.contains(qualified);
  }

  // Builds "domain/id" in scratch_; false when no entry can have that name.
  bool Qualify(std::string_view domain, std::string_view id) {
    if (domain.find('/') != std::string_view::npos || id.find('/') != std::string_view::npos) {
      return false;
    }
    scratch_.assign(domain);
    scratch_ += '/';
    scratch_ += id;
    return true;
  }

  bool HasDomain(bool attrs, const std::string& prefix) const {
    const dra::Device& d = *in_.device;
    if (attrs) {
      auto it = d.attributes.lower_bound(prefix);
      return it != d.attributes.end() && it->first.starts_with(prefix);
    }
    auto it = d.capacity.lower_bound(prefix);
    return it != d.capacity.end() && it->first.starts_with(prefix);
  }

  Value Eval(uint32_t idx) {
    const Node& n = p_.nodes[idx];
    switch (n.op) {
      case Op::kConst:
        switch (n.type) {
          case Type::kBool:
            return Value::Bool(n.b);
          case Type::kInt:
            return Value::Int(n.i);
          case Type::kString:
            return Value::Str(n.s);
          case Type::kQuantity:
            return Value::Qty(n.q.milli);
          case Type::kSemver:
            return Value::Ver(&n.v);
          default:
            return Error(n, "internal: constant of type " + std::string(TypeName(n.type)));
        }
      case Op::kDevice:
        return Error(n, "internal: device evaluated without a field");
      case Op::kDriver:
        return Value::Str(in_.driver);
      case Op::kAllowMulti:
        return Value::Bool(in_.device->allow_multiple_allocations);
      case Op::kAttributes:
        return Value::Map(Kind::kAttrDomains);
      case Op::kCapacity:
        return Value::Map(Kind::kCapDomains);
      case Op::kAttrEntry:
      case Op::kCapEntry:
        return Entry(n, n.op == Op::kAttrEntry, n.s, n.split, n.never);
      case Op::kIndex:
        return EvalIndex(n);
      case Op::kHasAttrKey:
      case Op::kHasCapKey:
        return Value::Bool(!n.never && HasKey(n.op == Op::kHasAttrKey, n.s));
      case Op::kHas: {
        const Value m = Eval(Kid(n, 0));
        if (m.kind == Kind::kError) {
          return m;
        }
        return Value::Bool(Qualify(m.s, n.s) && HasKey(m.kind == Kind::kAttrDomain, scratch_));
      }
      case Op::kHasDomain: {
        if (n.count == 0) {
          return Value::Bool(!n.never && HasDomain(n.b, n.s));
        }
        const Value m = Eval(Kid(n, 0));
        const Value key = Eval(Kid(n, 1));
        if (m.kind == Kind::kError) {
          return m;
        }
        if (key.kind == Kind::kError) {
          return key;
        }
        if (key.kind != Kind::kString) {
          return NoOverload(n, "\"in\"", {key.kind, m.kind});
        }
        if (key.s.find('/') != std::string_view::npos) {
          return Value::Bool(false);
        }
        scratch_.assign(key.s);
        scratch_ += '/';
        return Value::Bool(HasDomain(m.kind == Kind::kAttrDomains, scratch_));
      }
      case Op::kNot: {
        const Value v = Eval(Kid(n, 0));
        if (v.kind == Kind::kBool) {
          return Value::Bool(!v.b);
        }
        return v.kind == Kind::kError ? v : NoOverload(n, "\"!\"", {v.kind});
      }
      case Op::kAnd:
      case Op::kOr:
        return EvalLogical(n, n.op == Op::kAnd);
      case Op::kCond: {
        const Value c = Eval(Kid(n, 0));
        if (c.kind == Kind::kBool) {
          return Eval(Kid(n, c.b ? 1 : 2));
        }
        return c.kind == Kind::kError ? c : NoOverload(n, "\"?:\"", {c.kind});
      }
      case Op::kEq:
      case Op::kNe: {
        const Value l = Eval(Kid(n, 0));
        if (l.kind == Kind::kError) {
          return l;
        }
        const Value r = Eval(Kid(n, 1));
        if (r.kind == Kind::kError) {
          return r;
        }
        const Eq e = Equal(l, r);
        if (e == Eq::kNoOverload) {
          return NoOverload(n, n.op == Op::kEq ? "\"==\"" : "\"!=\"", {l.kind, r.kind});
        }
        return Value::Bool((e == Eq::kTrue) == (n.op == Op::kEq));
      }
      case Op::kLt:
      case Op::kLe:
      case Op::kGt:
      case Op::kGe:
        return EvalOrder(n);
      case Op::kIn:
        return EvalIn(n);
      case Op::kList:
        return Error(n, "internal: list evaluated outside in");
      case Op::kCall:
        return EvalCall(n);
    }
    return Error(n, "internal: unknown node");
  }

  Value EvalIndex(const Node& n) {
    const Value base = Eval(Kid(n, 0));
    if (base.kind == Kind::kError) {
      return base;
    }
    const Value key = Eval(Kid(n, 1));
    if (key.kind == Kind::kError) {
      return key;
    }
    const bool is_map = base.kind == Kind::kAttrDomains || base.kind == Kind::kCapDomains ||
                        base.kind == Kind::kAttrDomain || base.kind == Kind::kCapDomain;
    if (!is_map) {
      if (n.from_select) {
        return Error(n, "no such field: " + std::string(key.s) + " (a " + KindName(base.kind) + " has no fields)");
      }
      return NoOverload(n, "\"[]\"", {base.kind, key.kind});
    }
    if (key.kind != Kind::kString) {
      return NoOverload(n, "\"[]\"", {base.kind, key.kind});
    }
    switch (base.kind) {
      case Kind::kAttrDomains:
        return Value::Map(Kind::kAttrDomain, key.s);
      case Kind::kCapDomains:
        return Value::Map(Kind::kCapDomain, key.s);
      default: {
        const bool attrs = base.kind == Kind::kAttrDomain;
        if (!Qualify(base.s, key.s)) {
          return Error(n, MissingKey(attrs, base.s, key.s));
        }
        return Entry(n, attrs, scratch_, base.s.size() + 1, false);
      }
    }
  }

  Value EvalLogical(const Node& n, bool is_and) {
    // CEL's commutative && / ||: the absorbing value (false for &&, true for ||) wins over errors on either side;
    // evaluation stops at it.
    Value first_error;
    bool have_error = false;
    for (uint32_t k = 0; k < n.count; ++k) {
      const Value v = Eval(Kid(n, k));
      if (v.kind == Kind::kBool) {
        if (v.b != is_and) {
          return v;
        }
        continue;
      }
      if (!have_error) {
        first_error =
            v.kind == Kind::kError ? v : NoOverload(p_.nodes[Kid(n, k)], is_and ? "\"&&\"" : "\"||\"", {v.kind});
        have_error = true;
      }
    }
    return have_error ? first_error : Value::Bool(is_and);
  }

  Value EvalOrder(const Node& n) {
    const Value l = Eval(Kid(n, 0));
    if (l.kind == Kind::kError) {
      return l;
    }
    const Value r = Eval(Kid(n, 1));
    if (r.kind == Kind::kError) {
      return r;
    }
    const char* name = n.op == Op::kLt ? "\"<\"" : n.op == Op::kLe ? "\"<=\"" : n.op == Op::kGt ? "\">\"" : "\">=\"";
    if (l.kind != r.kind) {
      return NoOverload(n, name, {l.kind, r.kind});
    }
    int c = 0;
    switch (l.kind) {
      case Kind::kInt:
        c = l.i < r.i ? -1 : l.i > r.i ? 1 : 0;
        break;
      case Kind::kBool:
        c = static_cast<int>(l.b) - static_cast<int>(r.b);
        break;
      case Kind::kString: {
        const int s = l.s.compare(r.s);
        c = s < 0 ? -1 : s > 0 ? 1 : 0;
        break;
      }
      default:
        return NoOverload(n, name, {l.kind, r.kind});
    }
    switch (n.op) {
      case Op::kLt:
        return Value::Bool(c < 0);
      case Op::kLe:
        return Value::Bool(c <= 0);
      case Op::kGt:
        return Value::Bool(c > 0);
      default:
        return Value::Bool(c >= 0);
    }
  }

  Value EvalIn(const Node& n) {
    const Value elem = Eval(Kid(n, 0));
    if (elem.kind == Kind::kError) {
      return elem;
    }
    const Node& rhs = p_.nodes[Kid(n, 1)];
    if (rhs.op == Op::kList) {
      // The list's elements are evaluated first (an error among them is the result), then compared with CEL
      // equality, where only a true comparison counts.
      bool found = false;
      for (uint32_t k = 0; k < rhs.count; ++k) {
        const Value e = Eval(Kid(rhs, k));
        if (e.kind == Kind::kError) {
          return e;
        }
        found = found || Equal(elem, e) == Eq::kTrue;
      }
      return Value::Bool(found);
    }
    const Value m = Eval(Kid(n, 1));
    if (m.kind == Kind::kError) {
      return m;
    }
    if (m.kind == Kind::kAttrDomain || m.kind == Kind::kCapDomain) {
      if (elem.kind != Kind::kString) {
        return NoOverload(n, "\"in\"", {elem.kind, m.kind});
      }
      return Value::Bool(Qualify(m.s, elem.s) && HasKey(m.kind == Kind::kAttrDomain, scratch_));
    }
    if (m.kind == Kind::kAttrDomains || m.kind == Kind::kCapDomains) {
      if (elem.kind != Kind::kString) {
        return NoOverload(n, "\"in\"", {elem.kind, m.kind});
      }
      if (elem.s.find('/') != std::string_view::npos) {
        return Value::Bool(false);
      }
      scratch_.assign(elem.s);
      scratch_ += '/';
      return Value::Bool(HasDomain(m.kind == Kind::kAttrDomains, scratch_));
    }
    return NoOverload(n, "\"in\"", {elem.kind, m.kind});
  }

  Value EvalCall(const Node& n) {
    std::array<Value, 3> args;
    if (n.count > args.size()) {
      return Error(n, "internal: too many arguments");
    }
    for (uint32_t k = 0; k < n.count; ++k) {
      args[k] = Eval(Kid(n, k));
      if (args[k].kind == Kind::kError) {
        return args[k];
      }
    }
    const Value& a = args[0];
    const Value& b = args[1];
    switch (n.fn) {
      case Fn::kQuantity:
      case Fn::kIsQuantity: {
        if (a.kind != Kind::kString) {
          return NoOverload(n, n.fn == Fn::kQuantity ? "quantity" : "isQuantity", {a.kind});
        }
        auto q = dra::ParseQuantity(a.s);
        if (n.fn == Fn::kIsQuantity) {
          return Value::Bool(q.ok());
        }
        return q.ok() ? Value::Qty(q->milli) : Error(n, q.status().message());
      }
      case Fn::kSemver:
      case Fn::kIsSemver: {
        if (a.kind != Kind::kString || (n.count == 2 && b.kind != Kind::kBool)) {
          return NoOverload(n, n.fn == Fn::kSemver ? "semver" : "isSemver", {a.kind});
        }
        auto v = n.count == 2 && b.b ? ParseSemverNormalized(a.s) : dra::ParseSemver(a.s);
        if (n.fn == Fn::kIsSemver) {
          return Value::Bool(v.ok());
        }
        if (!v.ok()) {
          return Error(n, v.status().message());
        }
        return Value::Ver(Keep(std::move(*v)));
      }
      case Fn::kCompareTo:
      case Fn::kIsGreaterThan:
      case Fn::kIsLessThan: {
        int c = 0;
        if (a.kind == Kind::kQuantity && b.kind == Kind::kQuantity) {
          c = a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
        } else if (a.kind == Kind::kSemver && b.kind == Kind::kSemver) {
          c = Sign3(dra::CompareSemver(*a.v, *b.v));
        } else {
          const char* name = n.fn == Fn::kCompareTo       ? "compareTo"
                             : n.fn == Fn::kIsGreaterThan ? "isGreaterThan"
                                                          : "isLessThan";
          return NoOverload(n, name, {a.kind, b.kind});
        }
        if (n.fn == Fn::kCompareTo) {
          return Value::Int(c);
        }
        return Value::Bool(n.fn == Fn::kIsGreaterThan ? c > 0 : c < 0);
      }
      case Fn::kAsInteger:
      case Fn::kIsInteger:
      case Fn::kSign: {
        if (a.kind != Kind::kQuantity) {
          return NoOverload(n,
                            n.fn == Fn::kAsInteger   ? "asInteger"
                            : n.fn == Fn::kIsInteger ? "isInteger"
                                                     : "sign",
                            {a.kind});
        }
        if (n.fn == Fn::kSign) {
          return Value::Int(a.i < 0 ? -1 : a.i > 0 ? 1 : 0);
        }
        const bool whole = a.i % 1000 == 0;
        if (n.fn == Fn::kIsInteger) {
          return Value::Bool(whole);
        }
        return whole ? Value::Int(a.i / 1000)
                     : Error(n, "cannot convert value to integer (" + dra::FormatQuantity(dra::Quantity{a.i}) +
                                    " is not a whole number)");
      }
      case Fn::kAdd:
      case Fn::kSub: {
        const char* name = n.fn == Fn::kAdd ? "add" : "sub";
        if (a.kind != Kind::kQuantity || (b.kind != Kind::kQuantity && b.kind != Kind::kInt)) {
          return NoOverload(n, name, {a.kind, b.kind});
        }
        int64_t other = b.i;
        if (b.kind == Kind::kInt && __builtin_mul_overflow(b.i, int64_t{1000}, &other)) {
          return Error(n, std::string(name) + ": quantity beyond int64 milli-units");
        }
        int64_t out = 0;
        const bool overflow =
            n.fn == Fn::kAdd ? __builtin_add_overflow(a.i, other, &out) : __builtin_sub_overflow(a.i, other, &out);
        if (overflow) {
          return Error(n, std::string(name) + ": quantity beyond int64 milli-units");
        }
        return Value::Qty(out);
      }
      case Fn::kMajor:
      case Fn::kMinor:
      case Fn::kPatch: {
        const char* name = n.fn == Fn::kMajor ? "major" : n.fn == Fn::kMinor ? "minor" : "patch";
        if (a.kind != Kind::kSemver) {
          return NoOverload(n, name, {a.kind});
        }
        const uint64_t x = n.fn == Fn::kMajor ? a.v->major : n.fn == Fn::kMinor ? a.v->minor : a.v->patch;
        if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return Error(n, std::string(name) + "(): " + std::to_string(x) + " is beyond int64");
        }
        return Value::Int(static_cast<int64_t>(x));
      }
      case Fn::kStartsWith:
      case Fn::kEndsWith:
      case Fn::kContains: {
        const char* name = n.fn == Fn::kStartsWith ? "startsWith" : n.fn == Fn::kEndsWith ? "endsWith" : "contains";
        if (a.kind != Kind::kString || b.kind != Kind::kString) {
          return NoOverload(n, name, {a.kind, b.kind});
        }
        if (n.fn == Fn::kStartsWith) {
          return Value::Bool(a.s.starts_with(b.s));
        }
        if (n.fn == Fn::kEndsWith) {
          return Value::Bool(a.s.ends_with(b.s));
        }
        return Value::Bool(a.s.find(b.s) != std::string_view::npos);
      }
    }
    return Error(n, "internal: unknown function");
  }

  const Program::Impl& p_;
  const DeviceInput& in_;
  std::array<dra::Semver, 4> inline_semvers_;  // versions parsed during this evaluation
  size_t kept_ = 0;
  std::forward_list<dra::Semver> semvers_;  // beyond the inline ones
  std::vector<std::string> errors_;
  std::string scratch_;  // qualified names built at run time (keys that are not literals)
};

}  // namespace

common::Result<Program> Program::Compile(std::string_view expression) {
  if (expression.size() > kMaxExpressionBytes) {
    return common::InvalidArgument("CEL: the expression is " + std::to_string(expression.size()) +
                                   " bytes, more than the " + std::to_string(kMaxExpressionBytes) +
                                   " (10 KiB) gpusched compiles");
  }
  auto impl = std::make_shared<Impl>();
  impl->expression = std::string(expression);
  Lexer lexer(impl->expression);
  GPUSCHED_ASSIGN_OR_RETURN(tokens, lexer.Run());
  Parser parser(impl->expression, std::move(tokens), *impl);
  GPUSCHED_RETURN_IF_ERROR(parser.Run());
  return Program(std::move(impl));
}

common::Result<bool> Program::Matches(const DeviceInput& device) const {
  if (device.device == nullptr) {
    return common::InvalidArgument("CEL: no device to evaluate \"" + impl_->expression + "\" against");
  }
  Evaluator eval(*impl_, device);
  return eval.Run();
}

const std::string& Program::expression() const { return impl_->expression; }

}  // namespace gpusched::sched::cel
