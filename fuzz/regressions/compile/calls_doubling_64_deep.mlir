module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g1} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g1} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g1(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g2} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g2} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g2(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g3} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g3} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g3(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g4} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g4} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g4(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g5} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g5} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g5(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g6} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g6} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g6(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g7} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g7} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g7(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g8} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g8} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g8(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g9} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g9} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g9(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g10} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g10} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g10(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g11} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g11} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g11(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g12} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g12} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g12(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g13} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g13} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g13(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g14} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g14} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g14(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g15} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g15} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g15(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g16} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g16} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g16(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g17} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g17} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g17(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g18} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g18} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g18(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g19} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g19} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g19(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g20} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g20} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g20(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g21} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g21} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g21(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g22} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g22} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g22(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g23} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g23} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g23(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g24} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g24} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g24(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g25} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g25} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g25(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g26} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g26} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g26(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g27} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g27} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g27(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g28} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g28} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g28(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g29} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g29} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g29(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g30} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g30} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g30(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g31} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g31} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g31(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g32} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g32} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g32(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g33} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g33} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g33(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g34} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g34} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g34(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g35} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g35} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g35(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g36} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g36} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g36(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g37} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g37} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g37(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g38} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g38} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g38(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g39} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g39} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g39(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g40} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g40} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g40(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g41} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g41} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g41(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g42} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g42} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g42(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g43} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g43} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g43(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g44} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g44} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g44(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g45} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g45} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g45(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g46} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g46} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g46(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g47} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g47} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g47(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g48} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g48} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g48(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g49} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g49} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g49(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g50} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g50} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g50(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g51} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g51} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g51(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g52} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g52} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g52(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g53} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g53} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g53(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g54} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g54} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g54(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g55} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g55} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g55(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g56} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g56} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g56(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g57} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g57} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g57(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g58} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g58} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g58(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g59} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g59} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g59(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g60} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g60} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g60(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g61} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g61} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g61(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g62} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g62} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g62(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @g63} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @g63} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @g63(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "func.call"(%x) {callee = @leaf} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "func.call"(%0) {callee = @leaf} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @leaf(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "kiln.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
